// tests/stress/sync_stress_test.cpp: the synchronization primitives (Channel, Mutex,
// Semaphore, Event) under load, with cancellations racing grants, and runtimes destroyed
// while tasks wait on them.
//
// Every case runs for 1, 2 and 8 workers (8 is more than the CI machine's cores, on purpose:
// preempted workers make the races between a grant and a stop request common), several
// rounds each, with a fresh Runtime per round. Outcomes are checked exactly: every value
// sent is received once, every lock taken is counted, every permit is accounted for. A
// Watchdog per round names the round that hangs (a lost wake-up) instead of a meson timeout.

#include <eddy/eddy.hpp>

#include "support/counted.hpp"
#include "support/stress_rounds.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using eddy::JoinHandle;
using eddy::Task;

namespace {

#ifdef EDDY_TEST_TSAN
constexpr int kRounds = 3;
constexpr std::uint64_t kPerProducer = 500;
#else
constexpr int kRounds = 10;
constexpr std::uint64_t kPerProducer = 3000;
#endif
constexpr std::uint64_t kProducers = 6;
constexpr std::uint64_t kConsumers = 6;
constexpr std::size_t kWorkerCounts[] = {1, 2, 8};  // EDDY_STRESS_WORKERS overrides

template <class Body>
void for_each_configuration(Body body) {
    eddy::test::for_each_stress_configuration("sync_stress", kWorkerCounts, kRounds, body);
}

Task<std::optional<std::uint64_t>> receive_one(eddy::Channel<std::uint64_t>& ch) { co_return co_await ch.receive(); }

/// Receives until end-of-stream; every third receive runs under a token that another task
/// stops at some point, so cancellations race the senders' handoffs. Returns the sum and
/// count of what it received (a cancelled receive must not have taken anything).
Task<std::pair<std::uint64_t, std::uint64_t>> consumer(eddy::Channel<std::uint64_t>& ch,
                                                        std::atomic<std::uint64_t>& cancelled) {
    std::uint64_t sum = 0, count = 0;
    for (std::uint64_t i = 0;; ++i) {
        std::optional<std::uint64_t> v;
        if (i % 3 == 0) {
            std::stop_source stop;
            JoinHandle<void> stopper = eddy::spawn([](std::stop_source s) -> Task<void> {
                co_await eddy::yield_now();
                s.request_stop();
            }(stop));
            bool was_cancelled = false;
            try {
                v = co_await eddy::with_stop_token(receive_one(ch), stop.get_token());
            } catch (const eddy::OperationCancelled&) {
                was_cancelled = true;
            }
            co_await std::move(stopper);
            if (was_cancelled) {
                cancelled.fetch_add(1, std::memory_order_relaxed);
                continue;
            }
        } else {
            v = co_await ch.receive();
        }
        if (!v) break;
        sum += *v;
        ++count;
    }
    co_return std::pair{sum, count};
}

Task<void> producer(eddy::Channel<std::uint64_t>& ch, std::uint64_t id) {
    for (std::uint64_t i = 0; i < kPerProducer; ++i) co_await ch.send(id * kPerProducer + i + 1);
}

/// Takes the mutex `n` times, each time also a permit, some of the takes under a token that
/// is stopped concurrently; counts the successful ones in the plain int under the lock.
Task<long> locker(eddy::Mutex& m, eddy::Semaphore& s, long& plain, int n) {
    long mine = 0;
    for (int i = 0; i < n; ++i) {
        std::stop_source stop;
        auto take = [](eddy::Mutex& m, eddy::Semaphore& s, long& plain) -> Task<void> {
            co_await s.acquire();
            try {
                eddy::MutexGuard g = co_await m.lock();
                const long seen = plain;
                co_await eddy::yield_now();
                plain = seen + 1;
            } catch (...) {
                s.release();
                throw;
            }
            s.release();
        };
        if (i % 4 == 0) stop.request_stop();  // some stops come before the wait, some during
        JoinHandle<void> stopper = eddy::spawn([](std::stop_source s) -> Task<void> {
            s.request_stop();
            co_return;
        }(stop));
        // A local, not a conditional inside the co_await: g++ 12 mishandles the temporary.
        std::stop_token token = i % 2 == 0 ? stop.get_token() : std::stop_token{};
        try {
            co_await eddy::with_stop_token(take(m, s, plain), std::move(token));
            ++mine;
        } catch (const eddy::OperationCancelled&) {
        }
        co_await std::move(stopper);
    }
    co_return mine;
}

Task<void> wait_event(eddy::Event& e, eddy::test::Counted) { co_await e; }
Task<void> lock_mutex(eddy::Mutex& m, eddy::test::Counted) { eddy::MutexGuard g = co_await m.lock(); }
Task<void> acquire_permit(eddy::Semaphore& s, eddy::test::Counted) { co_await s.acquire(); }
Task<void> send_value(eddy::Channel<int>& ch, eddy::test::Counted) { co_await ch.send(1); }
Task<void> receive_value(eddy::Channel<int>& ch, eddy::test::Counted) { (void)co_await ch.receive(); }

} // namespace

TEST_SUITE("stress/sync") {

TEST_CASE("a channel with receives cancelled at random loses and duplicates nothing") {
    for_each_configuration([](std::size_t workers) {
        eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
        eddy::Channel<std::uint64_t> ch(4);
        std::atomic<std::uint64_t> cancelled{0};
        const auto [sum, count] = rt.block_on([](eddy::Channel<std::uint64_t>& ch, std::atomic<std::uint64_t>& cancelled)
                                                  -> Task<std::pair<std::uint64_t, std::uint64_t>> {
            std::vector<JoinHandle<std::pair<std::uint64_t, std::uint64_t>>> consumers;
            std::vector<JoinHandle<void>> producers;
            for (std::uint64_t i = 0; i < kConsumers; ++i) consumers.push_back(eddy::spawn(consumer(ch, cancelled)));
            for (std::uint64_t i = 0; i < kProducers; ++i) producers.push_back(eddy::spawn(producer(ch, i)));
            for (auto& p : producers) co_await std::move(p);
            ch.close();
            std::uint64_t sum = 0, count = 0;
            for (auto& c : consumers) {
                const auto [s, n] = co_await std::move(c);
                sum += s;
                count += n;
            }
            co_return std::pair{sum, count};
        }(ch, cancelled));
        constexpr std::uint64_t kAll = kProducers * kPerProducer;
        CHECK(count == kAll);
        CHECK(sum == kAll * (kAll + 1) / 2);
        CHECK(ch.size() == 0);
    });
}

TEST_CASE("a mutex and a semaphore with waits cancelled at random keep exact counts") {
    for_each_configuration([](std::size_t workers) {
        eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
        eddy::Mutex m;
        eddy::Semaphore s(3);
        long plain = 0;
        constexpr int kTasks = 16, kEach = 40;
        const long taken = rt.block_on([](eddy::Mutex& m, eddy::Semaphore& s, long& plain) -> Task<long> {
            std::vector<JoinHandle<long>> all;
            for (int i = 0; i < kTasks; ++i) all.push_back(eddy::spawn(locker(m, s, plain, kEach)));
            long taken = 0;
            for (auto& h : all) taken += co_await std::move(h);
            co_return taken;
        }(m, s, plain));
        CHECK(taken >= kTasks * kEach / 2);  // the uncancellable half always succeeds
        CHECK(plain == taken);
        CHECK_FALSE(m.is_locked());
        CHECK(s.available() == 3);
    });
}

TEST_CASE("a runtime destroyed while tasks wait on primitives unlinks every waiter") {
    // The primitives outlive the runtime: their queues must not point into destroyed frames
    // (ASan would see the set/release/close below touch freed memory).
    for_each_configuration([](std::size_t workers) {
        eddy::test::LifetimeCounter frames;
        eddy::Event e;
        eddy::Mutex m;
        eddy::Semaphore s(0);
        eddy::Channel<int> full(1), empty(1);
        REQUIRE(full.try_send(0));
        std::optional<eddy::MutexGuard> held = m.try_lock();
        {
            eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
            for (int i = 0; i < 10; ++i) {
                (void)rt.spawn(wait_event(e, eddy::test::Counted(frames)));
                (void)rt.spawn(lock_mutex(m, eddy::test::Counted(frames)));
                (void)rt.spawn(acquire_permit(s, eddy::test::Counted(frames)));
                (void)rt.spawn(send_value(full, eddy::test::Counted(frames)));
                (void)rt.spawn(receive_value(empty, eddy::test::Counted(frames)));
            }
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
            while (m.waiters() < 10 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
            CHECK(m.waiters() == 10);
        }
        CHECK(frames.alive() == 0);
        CHECK(m.waiters() == 0);
        e.set();
        held.reset();
        CHECK_FALSE(m.is_locked());
        s.release(5);
        CHECK(s.available() == 5);
        full.close();
        empty.close();
        CHECK(full.try_receive() == 0);
    });
}

TEST_CASE("a mutex or permit handed to a task that shutdown destroyed before it resumed is not lost") {
    // Releasing from this thread grants the first waiter and queues it; the runtime is then
    // destroyed at once, so some rounds destroy the granted frame before it ever ran. Its
    // awaiter must pass the ownership (or the permit) on instead of taking it with it.
    for_each_configuration([](std::size_t workers) {
        for (int i = 0; i < 20; ++i) {
            eddy::Mutex m;
            eddy::Semaphore s(0);
            std::optional<eddy::MutexGuard> held = m.try_lock();
            {
                eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
                eddy::test::LifetimeCounter frames;
                for (int k = 0; k < 4; ++k) {
                    (void)rt.spawn(lock_mutex(m, eddy::test::Counted(frames)));
                    (void)rt.spawn([](eddy::Semaphore& sem) -> Task<void> {
                        co_await sem.acquire();
                        sem.release();
                    }(s));
                }
                const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
                while (m.waiters() < 4 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
                REQUIRE(m.waiters() == 4);
                held.reset();
                s.release();
            }
            CHECK_FALSE(m.is_locked());
            CHECK(m.waiters() == 0);
            CHECK(s.available() == 1);
        }
    });
}

} // TEST_SUITE
