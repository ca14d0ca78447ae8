// tests/sync/channel_test.cpp: eddy::Channel<T>: FIFO order, backpressure, direct handoff,
// close (waiting senders and receivers), cancellation without loss, MPMC across workers, and
// misuse.
//
// Tests that need "these tasks are waiting now" use one worker and eddy::test::settle(),
// where that is exact.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <eddy/sync/channel.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/counted.hpp"
#include "support/sync_helpers.hpp"
#include "support/waiting.hpp"

using eddy::Channel;
using eddy::JoinHandle;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::test::Eager;
using eddy::test::outcome;
using eddy::test::settle;

namespace {

Task<void> send_one(Channel<int>& ch, int v) { co_await ch.send(v); }

Task<std::optional<int>> receive_one(Channel<int>& ch) { co_return co_await ch.receive(); }

/// Receives until end-of-stream; returns everything in order.
Task<std::vector<int>> drain(Channel<int>& ch) {
    std::vector<int> got;
    while (auto v = co_await ch.receive()) got.push_back(*v);
    co_return got;
}

Eager receive_off_worker(Channel<int>& ch, std::string& how) {
    try {
        co_await ch.receive();
        how = "ok";
    } catch (const eddy::WrongThread&) {
        how = "wrong thread";
    }
}

Eager send_off_worker(Channel<int>& ch, std::string& how) {
    try {
        co_await ch.send(1);
        how = "ok";
    } catch (const eddy::WrongThread&) {
        how = "wrong thread";
    }
}

}  // namespace

TEST_SUITE("sync/channel") {

TEST_CASE("values come out in the order they went in; try_send fails when full") {
    Channel<int> ch(3);
    CHECK(ch.capacity() == 3);
    CHECK(ch.try_send(1));
    CHECK(ch.try_send(2));
    CHECK(ch.try_send(3));
    int four = 4;
    CHECK_FALSE(ch.try_send(std::move(four)));
    CHECK(ch.size() == 3);
    CHECK(ch.try_receive() == 1);
    CHECK(ch.try_send(4));
    CHECK(ch.try_receive() == 2);
    CHECK(ch.try_receive() == 3);
    CHECK(ch.try_receive() == 4);
    CHECK(ch.try_receive() == std::nullopt);
    CHECK_FALSE(ch.is_closed());
}

TEST_CASE("a value that try_send refuses is left with the caller") {
    Channel<std::unique_ptr<int>> ch(1);
    CHECK(ch.try_send(std::make_unique<int>(1)));
    auto p = std::make_unique<int>(2);
    CHECK_FALSE(ch.try_send(std::move(p)));
    REQUIRE(p != nullptr);
    CHECK(*p == 2);
    ch.close();
    CHECK_THROWS_AS(ch.try_send(std::move(p)), eddy::ChannelClosed);
    REQUIRE(p != nullptr);
    CHECK(**ch.try_receive() == 1);
}

TEST_CASE("buffered values are destroyed with the channel") {
    eddy::test::LifetimeCounter counter;
    {
        Channel<eddy::test::Counted> ch(4);
        CHECK(ch.try_send(eddy::test::Counted(counter, 1)));
        CHECK(ch.try_send(eddy::test::Counted(counter, 2)));
    }
    CHECK(counter.alive() == 0);
}

TEST_CASE("a sender suspends while the channel is full and its value follows the buffered ones") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Channel<int> ch(2);
    const std::vector<int> got = rt.block_on([](Channel<int>& chan) -> Task<std::vector<int>> {
        co_await chan.send(1);
        co_await chan.send(2);
        JoinHandle<void> third = eddy::spawn(send_one(chan, 3));
        co_await settle();  // each waits before the next starts: the queue's order is known
        JoinHandle<void> fourth = eddy::spawn(send_one(chan, 4));
        co_await settle();
        std::vector<int> received;
        received.push_back(static_cast<int>(chan.size()));  // still full: both senders wait
        received.push_back(third.is_finished() || fourth.is_finished() ? 1 : 0);
        for (int i = 0; i < 4; ++i) received.push_back(*co_await chan.receive());
        co_await std::move(third);
        co_await std::move(fourth);
        co_return received;
    }(ch));
    CHECK(got == std::vector<int>{2, 0, 1, 2, 3, 4});
}

TEST_CASE("a send hands its value straight to a waiting receiver, in the receivers' order") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Channel<int> ch(1);
    const std::vector<int> got = rt.block_on([](Channel<int>& chan) -> Task<std::vector<int>> {
        JoinHandle<std::optional<int>> first = eddy::spawn(receive_one(chan));
        co_await settle();
        JoinHandle<std::optional<int>> second = eddy::spawn(receive_one(chan));
        co_await settle();
        co_await chan.send(10);
        co_await chan.send(20);
        std::vector<int> received{static_cast<int>(chan.size())};  // handed over, not buffered
        received.push_back(*co_await std::move(first));
        received.push_back(*co_await std::move(second));
        co_return received;
    }(ch));
    CHECK(got == std::vector<int>{0, 10, 20});
}

TEST_CASE("close wakes waiting senders with ChannelClosed; receivers drain the buffer, then see the end") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Channel<int> ch(2);
    struct Result {
        std::vector<std::string> senders;
        std::vector<int> drained;
        std::string late_send;
    };
    const Result r = rt.block_on([](Channel<int>& chan) -> Task<Result> {
        co_await chan.send(1);
        co_await chan.send(2);
        std::vector<JoinHandle<void>> senders;
        for (int v = 3; v <= 5; ++v) {
            senders.push_back(eddy::spawn(send_one(chan, v)));
            co_await settle();
        }
        chan.close();
        chan.close();  // idempotent
        Result result;
        for (auto& s : senders) result.senders.push_back(co_await outcome(std::move(s)));
        result.drained = co_await drain(chan);
        result.late_send = co_await outcome(eddy::spawn(send_one(chan, 6)));
        co_return result;
    }(ch));
    CHECK(r.senders == std::vector<std::string>{"closed", "closed", "closed"});
    CHECK(r.drained == std::vector<int>{1, 2});
    CHECK(r.late_send == "closed");
    CHECK(ch.is_closed());
    CHECK(ch.size() == 0);
}

TEST_CASE("close wakes waiting receivers with end-of-stream") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Channel<int> ch(4);
    const int ended = rt.block_on([](Channel<int>& chan) -> Task<int> {
        std::vector<JoinHandle<std::optional<int>>> receivers;
        for (int i = 0; i < 3; ++i) receivers.push_back(eddy::spawn(receive_one(chan)));
        co_await settle();
        chan.close();
        int closed = 0;
        for (auto& r : receivers) closed += (co_await std::move(r)) == std::nullopt ? 1 : 0;
        co_return closed;
    }(ch));
    CHECK(ended == 3);
}

TEST_CASE("close with senders and receivers at work on four workers loses and duplicates nothing") {
    // Senders count the values whose send returned normally; receivers collect what they got.
    // After the close, everything accepted is received exactly once and nothing refused is.
    Runtime rt(RuntimeConfig{.workers = 4});
    Channel<int> ch(2);
    constexpr int kSenders = 8, kPerSender = 200, kReceivers = 4;
    struct Result {
        std::vector<int> accepted;
        std::vector<int> received;
    };
    const Result r = rt.block_on([](Channel<int>& chan) -> Task<Result> {
        auto sender = [](Channel<int>& c, int id) -> Task<std::vector<int>> {
            std::vector<int> accepted;
            for (int i = 0; i < kPerSender; ++i) {
                const int v = id * kPerSender + i;
                try {
                    co_await c.send(v);
                } catch (const eddy::ChannelClosed&) {
                    break;
                }
                accepted.push_back(v);
            }
            co_return accepted;
        };
        std::vector<JoinHandle<std::vector<int>>> senders, receivers;
        for (int i = 0; i < kSenders; ++i) senders.push_back(eddy::spawn(sender(chan, i)));
        for (int i = 0; i < kReceivers; ++i) receivers.push_back(eddy::spawn(drain(chan)));
        for (int i = 0; i < 50; ++i) co_await eddy::yield_now();
        chan.close();
        Result result;
        for (auto& s : senders)
            for (int v : co_await std::move(s)) result.accepted.push_back(v);
        for (auto& h : receivers)
            for (int v : co_await std::move(h)) result.received.push_back(v);
        co_return result;
    }(ch));
    const std::multiset<int> accepted(r.accepted.begin(), r.accepted.end());
    const std::multiset<int> received(r.received.begin(), r.received.end());
    CHECK(accepted.size() == r.accepted.size());
    CHECK(received == accepted);
}

TEST_CASE("values from many senders on four workers all arrive once, each sender's in order") {
    Runtime rt(RuntimeConfig{.workers = 4});
    Channel<std::uint64_t> ch(8);
    constexpr std::uint64_t kSenders = 16, kPerSender = 2000, kReceivers = 4;
    const std::vector<std::vector<std::uint64_t>> got =
        rt.block_on([](Channel<std::uint64_t>& chan) -> Task<std::vector<std::vector<std::uint64_t>>> {
            auto sender = [](Channel<std::uint64_t>& c, std::uint64_t id) -> Task<void> {
                for (std::uint64_t i = 0; i < kPerSender; ++i) co_await c.send(id * kPerSender + i);
            };
            auto receiver = [](Channel<std::uint64_t>& c) -> Task<std::vector<std::uint64_t>> {
                std::vector<std::uint64_t> received;
                while (auto v = co_await c.receive()) received.push_back(*v);
                co_return received;
            };
            std::vector<JoinHandle<void>> senders;
            std::vector<JoinHandle<std::vector<std::uint64_t>>> receivers;
            for (std::uint64_t i = 0; i < kReceivers; ++i) receivers.push_back(eddy::spawn(receiver(chan)));
            for (std::uint64_t i = 0; i < kSenders; ++i) senders.push_back(eddy::spawn(sender(chan, i)));
            for (auto& s : senders) co_await std::move(s);
            chan.close();
            std::vector<std::vector<std::uint64_t>> received;
            for (auto& r : receivers) received.push_back(co_await std::move(r));
            co_return received;
        }(ch));
    std::vector<std::uint64_t> seen(kSenders * kPerSender, 0);
    for (const auto& one : got) {
        std::vector<std::uint64_t> last(kSenders, 0);
        std::vector<bool> any(kSenders, false);
        for (std::uint64_t v : one) {
            REQUIRE(v < seen.size());
            ++seen[v];
            const std::uint64_t sender = v / kPerSender;
            if (any[sender]) CHECK(v > last[sender]);  // one sender's values stay in order
            any[sender] = true;
            last[sender] = v;
        }
    }
    std::size_t wrong = 0;
    for (std::uint64_t n : seen) wrong += n == 1 ? 0 : 1;
    CHECK(wrong == 0);
}

TEST_CASE("a cancelled receive takes no item: the next receive gets it") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Channel<int> ch(1);
    struct Result {
        std::string cancelled;
        std::optional<int> next;
    };
    const Result r = rt.block_on([](Channel<int>& chan) -> Task<Result> {
        std::stop_source stop;
        JoinHandle<std::optional<int>> waiting =
            eddy::spawn(eddy::with_stop_token(receive_one(chan), stop.get_token()));
        co_await settle();
        stop.request_stop();
        Result result;
        result.cancelled = co_await outcome(std::move(waiting));
        co_await chan.send(7);
        result.next = co_await chan.receive();
        co_return result;
    }(ch));
    CHECK(r.cancelled == "cancelled");
    CHECK(r.next == 7);
}

TEST_CASE("a receive whose stop races a send on two workers either gets the value or leaves it") {
    Runtime rt(RuntimeConfig{.workers = 2});
    Channel<int> ch(1);
    constexpr int kRounds = 300;
    const int lost = rt.block_on([](Channel<int>& chan) -> Task<int> {
        int dropped = 0;
        for (int i = 0; i < kRounds; ++i) {
            std::stop_source stop;
            JoinHandle<std::optional<int>> rx = eddy::spawn(eddy::with_stop_token(receive_one(chan), stop.get_token()));
            JoinHandle<void> tx = eddy::spawn(send_one(chan, i));
            stop.request_stop();
            co_await std::move(tx);
            std::optional<int> got;
            try {
                got = co_await std::move(rx);
            } catch (const eddy::OperationCancelled&) {
                got = chan.try_receive();  // not taken: must still be in the channel
            }
            if (got != i) ++dropped;
        }
        co_return dropped;
    }(ch));
    CHECK(lost == 0);
    CHECK(ch.size() == 0);
}

TEST_CASE("a cancelled send sends nothing") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Channel<int> ch(1);
    struct Result {
        std::string cancelled;
        std::vector<int> rest;
    };
    const Result r = rt.block_on([](Channel<int>& chan) -> Task<Result> {
        co_await chan.send(1);
        std::stop_source stop;
        JoinHandle<void> waiting = eddy::spawn(eddy::with_stop_token(send_one(chan, 2), stop.get_token()));
        co_await settle();
        stop.request_stop();
        Result result;
        result.cancelled = co_await outcome(std::move(waiting));
        chan.close();
        result.rest = co_await drain(chan);
        co_return result;
    }(ch));
    CHECK(r.cancelled == "cancelled");
    CHECK(r.rest == std::vector<int>{1});
}

TEST_CASE("an operation started under a stopped token throws at once, even if it could complete") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Channel<int> ch(2);
    CHECK(ch.try_send(1));
    std::stop_source stop;
    stop.request_stop();
    const std::string how = rt.block_on([](Channel<int>& chan, std::stop_token t) -> Task<std::string> {
        co_return co_await outcome(eddy::spawn(eddy::with_stop_token(receive_one(chan), t)));
    }(ch, stop.get_token()));
    CHECK(how == "cancelled");
    CHECK(ch.size() == 1);
}

TEST_CASE("misuse: capacity 0, send on a closed channel, awaiting off a worker") {
    CHECK_THROWS_AS(Channel<int>(0), std::invalid_argument);

    Channel<int> ch(1);
    std::string how;
    receive_off_worker(ch, how);
    CHECK(how == "wrong thread");
    how.clear();
    send_off_worker(ch, how);
    CHECK(how == "wrong thread");
    CHECK(ch.size() == 0);

    Runtime rt(RuntimeConfig{.workers = 1});
    ch.close();
    CHECK(rt.block_on(outcome(rt.spawn(send_one(ch, 1)))) == "closed");
    CHECK(rt.block_on(receive_one(ch)) == std::nullopt);
}

}  // TEST_SUITE("sync/channel")
