// tests/sync/unbounded_channel_test.cpp: eddy::UnboundedChannel<T>: FIFO order through
// the buffer's growth, no allocation per message, direct handoff to waiting receivers, close
// (waiting receivers, draining, sends refused with the value left to the caller), values
// destroyed with the channel, cancellation without loss, plain threads and tasks on four
// workers sending at once (every value received exactly once), runtime shutdown while
// receivers wait, and misuse.
//
// This file replaces the global operator new (counting per thread) to show that messages
// do not allocate; not in the TSan build, whose runtime defines operator new itself.
//
// Tests that need "these tasks are waiting now" use one worker and eddy::test::settle(),
// where that is exact.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/sync/unbounded_channel.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/counted.hpp"
#include "support/off_worker.hpp"
#include "support/sync_helpers.hpp"
#include "support/tsan.hpp"
#include "support/waiting.hpp"

#ifndef EDDY_TEST_TSAN
namespace {
thread_local std::uint64_t allocations = 0;  // operator new calls on this thread
}  // namespace

// Not inlined: g++ 12 would pair what it sees inside them (malloc, free) with the calls to
// operator new and delete it sees elsewhere (-Wmismatched-new-delete).
[[gnu::noinline]] void* operator new(std::size_t n) {
    ++allocations;
    if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
    throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }
// The array forms too: the buffer is a `new Slot[n]`, and ASan's runtime defines them
// without going through operator new.
[[gnu::noinline]] void* operator new[](std::size_t n) { return ::operator new(n); }
[[gnu::noinline]] void operator delete[](void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#endif

using eddy::JoinHandle;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::UnboundedChannel;
using eddy::test::outcome;
using eddy::test::settle;

namespace {

Task<std::optional<int>> receive_one(UnboundedChannel<int>& ch) { co_return co_await ch.receive(); }

/// Receives until end-of-stream; returns everything in order.
template <class T>
Task<std::vector<T>> drain(UnboundedChannel<T>& ch) {
    std::vector<T> got;
    while (auto v = co_await ch.receive()) got.push_back(*v);
    co_return got;
}

}  // namespace

TEST_SUITE("sync/unbounded_channel") {

TEST_CASE("values come out in the order they went in, across the buffer's growth and wrap-around") {
    UnboundedChannel<int> ch;
    CHECK(ch.size() == 0);
    CHECK(ch.try_receive() == std::nullopt);
    int next_in = 0, next_out = 0, wrong = 0;
    // Interleave sends and receives so the ring wraps before it grows, at every size.
    for (int round = 1; round <= 12; ++round) {
        for (int i = 0; i < round * 37; ++i) ch.send(next_in++);
        for (int i = 0; i < round * 20; ++i)
            if (ch.try_receive() != next_out++) ++wrong;
    }
    CHECK(ch.size() == static_cast<std::size_t>(next_in - next_out));
    while (auto v = ch.try_receive())
        if (*v != next_out++) ++wrong;
    CHECK(wrong == 0);
    CHECK(next_out == next_in);
    const int lvalue = 5;
    ch.send(lvalue);  // a copy
    CHECK(ch.try_receive() == 5);
}

#ifndef EDDY_TEST_TSAN
TEST_CASE("no allocation per message: only the buffer's doublings allocate") {
    UnboundedChannel<std::uint64_t> ch;
    const std::uint64_t before = allocations;
    for (std::uint64_t i = 0; i < 1000; ++i) ch.send(i);
    const std::uint64_t growth = allocations - before;
    CHECK(growth == 8);  // 8, 16, ..., 1024 slots
    std::uint64_t wrong = 0;
    for (std::uint64_t i = 0; i < 1000; ++i) wrong += ch.try_receive() == i ? 0 : 1;
    // The buffer holds 1,000 now: 100,000 more messages through it, none allocates.
    const std::uint64_t steady = allocations;
    for (std::uint64_t i = 0; i < 100'000; ++i) {
        ch.send(i);
        if (i % 3 == 0) ch.send(i);
        if (ch.try_receive() != i) ++wrong;
        if (i % 3 == 0 && ch.try_receive() != i) ++wrong;
    }
    CHECK(allocations - steady == 0);
    CHECK(wrong == 0);
}
#endif

TEST_CASE("a send hands its value straight to a waiting receiver, in the receivers' order") {
    Runtime rt(RuntimeConfig{.workers = 1});
    UnboundedChannel<int> ch;
    const std::vector<int> got = rt.block_on([](UnboundedChannel<int>& chan) -> Task<std::vector<int>> {
        JoinHandle<std::optional<int>> first = eddy::spawn(receive_one(chan));
        co_await settle();
        JoinHandle<std::optional<int>> second = eddy::spawn(receive_one(chan));
        co_await settle();
        chan.send(10);
        chan.send(20);
        chan.send(30);
        std::vector<int> received{static_cast<int>(chan.size())};  // two handed over, one buffered
        received.push_back(*co_await std::move(first));
        received.push_back(*co_await std::move(second));
        received.push_back(*co_await chan.receive());
        co_return received;
    }(ch));
    CHECK(got == std::vector<int>{1, 10, 20, 30});
}

TEST_CASE("close: waiting receivers get the end; the buffer drains first; sends are refused and keep their value") {
    Runtime rt(RuntimeConfig{.workers = 1});
    UnboundedChannel<std::unique_ptr<int>> ch;
    struct Result {
        int ended = 0;
        std::vector<int> drained;
    };
    const Result r = rt.block_on([](UnboundedChannel<std::unique_ptr<int>>& chan) -> Task<Result> {
        auto receive = [](UnboundedChannel<std::unique_ptr<int>>& c) -> Task<bool> {
            co_return !(co_await c.receive()).has_value();
        };
        std::vector<JoinHandle<bool>> waiting;
        for (int i = 0; i < 3; ++i) waiting.push_back(eddy::spawn(receive(chan)));
        co_await settle();
        chan.close();
        Result result;
        for (auto& h : waiting) result.ended += co_await std::move(h) ? 1 : 0;
        co_return result;
    }(ch));
    CHECK(r.ended == 3);
    CHECK(ch.is_closed());
    auto p = std::make_unique<int>(1);
    CHECK_THROWS_AS(ch.send(std::move(p)), eddy::ChannelClosed);
    REQUIRE(p != nullptr);  // left with the caller
    CHECK(*p == 1);

    UnboundedChannel<int> buffered;
    buffered.send(1);
    buffered.send(2);
    buffered.close();
    buffered.close();  // idempotent
    CHECK(buffered.is_closed());
    CHECK(rt.block_on(drain(buffered)) == std::vector<int>{1, 2});
    CHECK(rt.block_on(receive_one(buffered)) == std::nullopt);
    CHECK_THROWS_AS(buffered.send(3), eddy::ChannelClosed);
    CHECK(buffered.size() == 0);
}

TEST_CASE("buffered values are destroyed with the channel; refused ones stay with the caller") {
    eddy::test::LifetimeCounter counter;
    {
        UnboundedChannel<eddy::test::Counted> ch;
        for (int i = 0; i < 20; ++i) ch.send(eddy::test::Counted(counter, i));  // grows twice
        CHECK(counter.alive() == 20);
        CHECK(ch.try_receive()->value() == 0);
        CHECK(counter.alive() == 19);
    }
    CHECK(counter.alive() == 0);
}

TEST_CASE("a cancelled receive consumes nothing: the next receive gets the value") {
    Runtime rt(RuntimeConfig{.workers = 1});
    UnboundedChannel<int> ch;
    struct Result {
        std::string cancelled;
        std::optional<int> next;
    };
    const Result r = rt.block_on([](UnboundedChannel<int>& chan) -> Task<Result> {
        std::stop_source stop;
        JoinHandle<std::optional<int>> waiting =
            eddy::spawn(eddy::with_stop_token(receive_one(chan), stop.get_token()));
        co_await settle();
        stop.request_stop();
        Result result;
        result.cancelled = co_await outcome(std::move(waiting));
        chan.send(7);  // not handed to the cancelled receiver: buffered
        result.next = co_await chan.receive();
        co_return result;
    }(ch));
    CHECK(r.cancelled == "cancelled");
    CHECK(r.next == 7);
    CHECK(ch.size() == 0);
}

TEST_CASE("a receive under a stopped token throws at once, even if a value is buffered") {
    Runtime rt(RuntimeConfig{.workers = 1});
    UnboundedChannel<int> ch;
    ch.send(1);
    std::stop_source stop;
    stop.request_stop();
    const std::string how = rt.block_on([](UnboundedChannel<int>& chan, std::stop_token t) -> Task<std::string> {
        co_return co_await outcome(eddy::spawn(eddy::with_stop_token(receive_one(chan), t)));
    }(ch, stop.get_token()));
    CHECK(how == "cancelled");
    CHECK(ch.size() == 1);
}

TEST_CASE("a receive whose stop races a send from a plain thread either gets the value or leaves it") {
    Runtime rt(RuntimeConfig{.workers = 2});
    UnboundedChannel<int> ch;
    constexpr int kRounds = 300;
    int lost = 0;
    for (int i = 0; i < kRounds; ++i) {
        std::stop_source stop;
        JoinHandle<std::optional<int>> waiter = rt.spawn(eddy::with_stop_token(receive_one(ch), stop.get_token()));
        std::thread sender([&ch, i] { ch.send(i); });
        stop.request_stop();
        sender.join();
        std::optional<int> got;
        try {
            got = rt.block_on([](JoinHandle<std::optional<int>> h) -> Task<std::optional<int>> {
                co_return co_await std::move(h);
            }(std::move(waiter)));
        } catch (const eddy::OperationCancelled&) {
            got = ch.try_receive();  // not taken: must still be in the channel
        }
        if (got != i) ++lost;
    }
    CHECK(lost == 0);
    CHECK(ch.size() == 0);
}

TEST_CASE(
    "plain threads and tasks on four workers send at once; every value is received exactly once, in each sender's "
    "order") {
    Runtime rt(RuntimeConfig{.workers = 4});
    UnboundedChannel<std::uint64_t> ch;
    constexpr std::uint64_t kThreads = 3, kTasks = 8, kPerSender = 3000, kReceivers = 4;
    constexpr std::uint64_t kSenders = kThreads + kTasks;
    std::vector<JoinHandle<std::vector<std::uint64_t>>> receivers;
    for (std::uint64_t i = 0; i < kReceivers; ++i) receivers.push_back(rt.spawn(drain(ch)));
    std::vector<JoinHandle<void>> tasks;
    for (std::uint64_t t = 0; t < kTasks; ++t) {
        tasks.push_back(rt.spawn([](UnboundedChannel<std::uint64_t>& chan, std::uint64_t id) -> Task<void> {
            for (std::uint64_t i = 0; i < kPerSender; ++i) {
                chan.send(id * kPerSender + i);
                if (i % 64 == 0) co_await eddy::yield_now();
            }
        }(ch, kThreads + t)));
    }
    std::vector<std::thread> threads;
    for (std::uint64_t t = 0; t < kThreads; ++t) {
        threads.emplace_back([&ch, t] {
            for (std::uint64_t i = 0; i < kPerSender; ++i) ch.send(t * kPerSender + i);
        });
    }
    for (auto& t : threads) t.join();
    for (auto& h : tasks)
        rt.block_on([](JoinHandle<void> handle) -> Task<void> { co_await std::move(handle); }(std::move(h)));
    ch.close();
    std::vector<std::uint64_t> seen(kSenders * kPerSender, 0);
    int disorder = 0;
    for (auto& h : receivers) {
        const std::vector<std::uint64_t> got =
            rt.block_on([](JoinHandle<std::vector<std::uint64_t>> handle) -> Task<std::vector<std::uint64_t>> {
                co_return co_await std::move(handle);
            }(std::move(h)));
        std::vector<std::int64_t> last(kSenders, -1);
        for (std::uint64_t v : got) {
            if (v >= seen.size()) {
                ++disorder;  // never sent
                continue;
            }
            ++seen[v];
            const std::uint64_t s = v / kPerSender;
            if (static_cast<std::int64_t>(v) <= last[s]) ++disorder;  // one sender's values stay in order
            last[s] = static_cast<std::int64_t>(v);
        }
    }
    std::size_t wrong = 0;
    for (std::uint64_t n : seen) wrong += n == 1 ? 0 : 1;
    CHECK(wrong == 0);
    CHECK(disorder == 0);
}

TEST_CASE("a runtime destroyed while receivers wait unlinks them; the channel works on") {
    eddy::test::LifetimeCounter frames;
    UnboundedChannel<int> ch;
    {
        Runtime rt(RuntimeConfig{.workers = 2});
        std::atomic<int> waiting{0};
        for (int i = 0; i < 10; ++i) {
            (void)rt.spawn(
                [](UnboundedChannel<int>& chan, std::atomic<int>& waiters, eddy::test::Counted) -> Task<void> {
                    waiters.fetch_add(1);
                    (void)co_await chan.receive();
                }(ch, waiting, eddy::test::Counted(frames)));
        }
        const auto deadline = std::chrono::steady_clock::now() + eddy::test::kDeadline;
        while (waiting.load() < 10 && !eddy::test::past(deadline)) std::this_thread::yield();
    }
    CHECK(frames.alive() == 0);
    ch.send(1);  // buffered: no destroyed waiter is handed the value (ASan)
    CHECK(ch.size() == 1);
    ch.close();
    CHECK(ch.try_receive() == 1);
}

TEST_CASE("misuse: receiving off a worker throws WrongThread and takes nothing") {
    UnboundedChannel<int> ch;
    ch.send(1);
    std::string how;
    eddy::test::await_off_worker([&] { return ch.receive(); }, how);
    CHECK(how == "wrong thread");
    CHECK(ch.size() == 1);
}

}  // TEST_SUITE("sync/unbounded_channel")
