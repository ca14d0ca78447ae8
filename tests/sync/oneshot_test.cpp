// tests/sync/oneshot_test.cpp: eddy::oneshot: a value from a task or a thread, the sender
// or the receiver dropped, sending twice, cancellation without loss, and misuse.
#include <doctest/doctest.h>

#include <memory>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>

#include <eddy/runtime/join_handle.hpp>
#include <eddy/sync/oneshot.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/counted.hpp"
#include "support/sync_helpers.hpp"
#include "support/waiting.hpp"

using eddy::JoinHandle;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::oneshot::Receiver;
using eddy::oneshot::Sender;
using eddy::test::Eager;
using eddy::test::outcome;
using eddy::test::settle;

namespace {

template <class T>
Task<T> receive(Receiver<T>& rx) {
    co_return co_await rx;
}

Task<void> send_later(Sender<std::unique_ptr<int>> tx, int v) {
    co_await settle();
    tx.send(std::make_unique<int>(v));
}

Eager receive_off_worker(Receiver<int>& rx, std::string& how) {
    try {
        co_await rx;
        how = "ok";
    } catch (const eddy::WrongThread&) {
        how = "wrong thread";
    }
}

}  // namespace

TEST_SUITE("sync/oneshot") {

TEST_CASE("the value sent by another task reaches the waiting receiver") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto [tx, rx] = eddy::oneshot::channel<std::unique_ptr<int>>();
    const int v =
        rt.block_on([](Sender<std::unique_ptr<int>> sender, Receiver<std::unique_ptr<int>> receiver) -> Task<int> {
            eddy::spawn(send_later(std::move(sender), 42));
            std::unique_ptr<int> p = co_await receiver;
            co_return *p;
        }(std::move(tx), std::move(rx)));
    CHECK(v == 42);
}

TEST_CASE("a value sent before the receive, from a thread, is there at once") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto [tx, rx] = eddy::oneshot::channel<int>();
    std::thread sender([tx = std::move(tx)]() mutable { tx.send(7); });
    sender.join();
    CHECK(rt.block_on(receive(rx)) == 7);
    // Received once: the channel is used up.
    CHECK(rt.block_on(outcome(rt.spawn(receive(rx)))) == "closed");
}

TEST_CASE("a sender dropped without sending wakes the receiver with ChannelClosed") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto [tx, rx] = eddy::oneshot::channel<int>();
    const std::string how = rt.block_on([](Sender<int> sender, Receiver<int>& receiver) -> Task<std::string> {
        JoinHandle<int> waiting = eddy::spawn(receive(receiver));
        co_await settle();
        { Sender<int> dropped = std::move(sender); }
        co_return co_await outcome(std::move(waiting));
    }(std::move(tx), rx));
    CHECK(how == "closed");
}

TEST_CASE("send throws ChannelClosed once the receiver is dropped, and when sending twice") {
    eddy::test::LifetimeCounter counter;
    {
        auto [tx, rx] = eddy::oneshot::channel<eddy::test::Counted>();
        { Receiver<eddy::test::Counted> dropped = std::move(rx); }
        CHECK(tx.is_closed());
        CHECK_THROWS_AS(tx.send(eddy::test::Counted(counter, 1)), eddy::ChannelClosed);
    }
    CHECK(counter.alive() == 0);  // the refused value was dropped
    auto [tx, rx] = eddy::oneshot::channel<int>();
    CHECK_FALSE(tx.is_closed());
    tx.send(1);
    CHECK_THROWS_AS(tx.send(2), eddy::ChannelClosed);
}

TEST_CASE("a value never received is destroyed with the last end") {
    eddy::test::LifetimeCounter counter;
    {
        auto [tx, rx] = eddy::oneshot::channel<eddy::test::Counted>();
        tx.send(eddy::test::Counted(counter, 1));
        CHECK(counter.alive() == 1);
    }
    CHECK(counter.alive() == 0);
}

TEST_CASE("a cancelled receive takes nothing: the value sent later is still there") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto [tx, rx] = eddy::oneshot::channel<int>();
    struct Result {
        std::string cancelled;
        int later = 0;
    };
    const Result r = rt.block_on([](Sender<int>& sender, Receiver<int>& receiver) -> Task<Result> {
        std::stop_source stop;
        JoinHandle<int> waiting = eddy::spawn(eddy::with_stop_token(receive(receiver), stop.get_token()));
        co_await settle();
        stop.request_stop();
        Result result;
        result.cancelled = co_await outcome(std::move(waiting));
        sender.send(5);
        result.later = co_await receiver;
        co_return result;
    }(tx, rx));
    CHECK(r.cancelled == "cancelled");
    CHECK(r.later == 5);
}

TEST_CASE("misuse: awaiting off a worker throws WrongThread") {
    auto [tx, rx] = eddy::oneshot::channel<int>();
    std::string how;
    receive_off_worker(rx, how);
    CHECK(how == "wrong thread");
}

}  // TEST_SUITE("sync/oneshot")
