// tests/sync/event_test.cpp: eddy::Event: set wakes every waiter (in order on one worker),
// set from another thread, cancellation of a waiter, and misuse.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <eddy/sync/event.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/sync_helpers.hpp"
#include "support/waiting.hpp"

using eddy::Event;
using eddy::JoinHandle;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::test::Eager;
using eddy::test::outcome;
using eddy::test::settle;

namespace {

Task<void> wait_and_log(Event& e, std::vector<int>& order, int id) {
    co_await e;
    order.push_back(id);
}

Task<void> wait_for(Event& e) { co_await e; }

Eager wait_off_worker(Event& e, std::string& how) {
    try {
        co_await e;
        how = "ok";
    } catch (const eddy::WrongThread&) {
        how = "wrong thread";
    }
}

}  // namespace

TEST_SUITE("sync/event") {

TEST_CASE("set wakes every waiter, in the order they started waiting on one worker; later sets do nothing") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Event e;
    std::vector<int> order;
    rt.block_on([](Event& event, std::vector<int>& trace) -> Task<void> {
        std::vector<JoinHandle<void>> waiters;
        for (int id = 1; id <= 4; ++id) {
            waiters.push_back(eddy::spawn(wait_and_log(event, trace, id)));
            co_await settle();
        }
        event.set();
        event.set();
        for (auto& h : waiters) co_await std::move(h);
        co_await event;  // already set: returns
    }(e, order));
    CHECK(e.is_set());
    CHECK(order == std::vector<int>{1, 2, 3, 4});
}

TEST_CASE("set from a thread that is not a worker wakes the waiters in the order they waited") {
    // The waiters then go through the FIFO global queue (not the setter's LIFO slot and
    // deque): they must be queued oldest first.
    Runtime rt(RuntimeConfig{.workers = 1});
    Event e;
    std::vector<int> order;
    std::vector<JoinHandle<void>> waiters;
    for (int id = 1; id <= 4; ++id) {
        const std::uint64_t parks = rt.metrics().workers[0].parks;
        waiters.push_back(rt.spawn(wait_and_log(e, order, id)));
        // The worker parks again only once this waiter has suspended on the event.
        const auto deadline = std::chrono::steady_clock::now() + eddy::test::kDeadline;
        while (rt.metrics().workers[0].parks == parks && !eddy::test::past(deadline)) std::this_thread::yield();
    }
    e.set();  // from this thread
    for (auto& h : waiters) REQUIRE(eddy::test::wait_finished(h));
    CHECK(order == std::vector<int>{1, 2, 3, 4});
}

TEST_CASE("set from a thread that is not a worker wakes tasks on four workers") {
    Runtime rt(RuntimeConfig{.workers = 4});
    Event e;
    std::vector<JoinHandle<void>> waiters;
    for (int i = 0; i < 16; ++i) waiters.push_back(rt.spawn(wait_for(e)));
    std::thread setter([&e] { e.set(); });
    setter.join();
    for (auto& h : waiters) CHECK(eddy::test::wait_finished(h));
}

TEST_CASE("a cancelled wait throws OperationCancelled; the others still wake at set") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Event e;
    struct Result {
        std::string cancelled, other;
    };
    const Result r = rt.block_on([](Event& event) -> Task<Result> {
        std::stop_source stop;
        JoinHandle<void> cancelled = eddy::spawn(eddy::with_stop_token(wait_for(event), stop.get_token()));
        JoinHandle<void> other = eddy::spawn(wait_for(event));
        co_await settle();
        stop.request_stop();
        Result result;
        result.cancelled = co_await outcome(std::move(cancelled));
        event.set();
        result.other = co_await outcome(std::move(other));
        co_return result;
    }(e));
    CHECK(r.cancelled == "cancelled");
    CHECK(r.other == "ok");
}

TEST_CASE("awaiting under a stopped token throws at once, even when the event is set") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Event e;
    e.set();
    std::stop_source stop;
    stop.request_stop();
    CHECK(rt.block_on(outcome(rt.spawn(eddy::with_stop_token(wait_for(e), stop.get_token())))) == "cancelled");
}

TEST_CASE("misuse: awaiting off a worker throws WrongThread") {
    Event e;
    std::string how;
    wait_off_worker(e, how);
    CHECK(how == "wrong thread");
}

}  // TEST_SUITE("sync/event")
