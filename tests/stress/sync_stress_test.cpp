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

template <class Ch>
Task<std::optional<std::uint64_t>> receive_one(Ch& ch) {
    co_return co_await ch.receive();
}

/// Awaits `op`; the `i`-th call, when `i` is a multiple of 3, runs it under a token that
/// another task stops after a yield, so the stop races the operation's wait. Returns
/// std::nullopt, counted in `cancelled`, when the stop won (the operation had no effect).
template <class T>
Task<std::optional<T>> racing_stop_every_third(Task<T> op, std::uint64_t i, std::atomic<std::uint64_t>& cancelled) {
    std::optional<T> v;
    if (i % 3 != 0) {
        v.emplace(co_await std::move(op));
        co_return v;
    }
    std::stop_source stop;
    JoinHandle<void> stopper = eddy::spawn([](std::stop_source s) -> Task<void> {
        co_await eddy::yield_now();
        s.request_stop();
    }(stop));
    try {
        v.emplace(co_await eddy::with_stop_token(std::move(op), stop.get_token()));
    } catch (const eddy::OperationCancelled&) {
        cancelled.fetch_add(1, std::memory_order_relaxed);
    }
    co_await std::move(stopper);
    co_return v;
}

/// Receives from a Channel or an UnboundedChannel until end-of-stream; every third receive
/// runs under a racing stop, so cancellations race the senders' handoffs. Returns the sum
/// and count of what it received (a cancelled receive must not have taken anything).
template <class Ch>
Task<std::pair<std::uint64_t, std::uint64_t>> consumer(Ch& ch, std::atomic<std::uint64_t>& cancelled) {
    std::uint64_t sum = 0, count = 0;
    for (std::uint64_t i = 0;; ++i) {
        const std::optional<std::optional<std::uint64_t>> got =
            co_await racing_stop_every_third(receive_one(ch), i, cancelled);
        if (!got) continue;  // cancelled
        if (!*got) break;    // closed and drained
        sum += **got;
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

// --- watch, broadcast and UnboundedChannel ------------------------------------------------
// The same checks; a broadcast receiver accounts for every value sent: received, or reported
// lost by a Lagged whose count matches the gap exactly.

namespace {

Task<void> unbounded_producer(eddy::UnboundedChannel<std::uint64_t>& ch, std::uint64_t id) {
    for (std::uint64_t i = 0; i < kPerProducer; ++i) {
        ch.send(id * kPerProducer + i + 1);
        if (i % 32 == 0) co_await eddy::yield_now();  // let the consumers interleave
    }
}

/// One broadcast receive: a value (nullopt at the end) or the count a Lagged reported.
struct Got {
    std::optional<std::uint64_t> value;
    std::uint64_t missed = 0;
};

Task<Got> broadcast_receive(eddy::broadcast::Receiver<std::uint64_t>& rx) {
    Got g;
    try {
        g.value = co_await rx.receive();
    } catch (const eddy::broadcast::Lagged& lag) {
        g.missed = lag.missed();
    }
    co_return g;
}

/// What a broadcast receiver saw of the values 1..N sent in order by one sender.
struct Tally {
    std::uint64_t received = 0;
    std::uint64_t missed = 0;  // the sum of the Lagged counts
    std::uint64_t wrong = 0;   // values that were not exactly the one expected
    std::uint64_t last = 0;
};

/// Receives until the end; every third receive runs under a racing stop. Each value must be
/// the one after the previous, or after the previous plus the lag reported in between.
Task<Tally> broadcast_consumer(eddy::broadcast::Receiver<std::uint64_t> rx, std::atomic<std::uint64_t>& cancelled) {
    Tally t;
    std::uint64_t expected = 1;
    for (std::uint64_t i = 0;; ++i) {
        const std::optional<Got> got = co_await racing_stop_every_third(broadcast_receive(rx), i, cancelled);
        if (!got) continue;  // cancelled: consumed nothing
        const Got& g = *got;
        if (g.missed != 0) {
            t.missed += g.missed;
            expected += g.missed;
            continue;
        }
        if (!g.value) break;
        if (*g.value != expected) ++t.wrong;
        expected = *g.value + 1;
        t.last = *g.value;
        ++t.received;
    }
    co_return t;
}

/// The value after the next change, or nullopt once the sender is gone.
Task<std::optional<std::uint64_t>> watch_next(eddy::watch::Receiver<std::uint64_t>& rx) {
    try {
        co_await rx.changed();
    } catch (const eddy::ChannelClosed&) {
        co_return std::nullopt;
    }
    co_return *rx.borrow();
}

/// Follows the watched value until the sender is gone; every third changed() runs under a
/// racing stop. Returns the last value seen, or 0 if it ever went backwards.
Task<std::uint64_t> watch_follower(eddy::watch::Receiver<std::uint64_t> rx, std::atomic<std::uint64_t>& cancelled) {
    std::uint64_t last = 0;
    for (std::uint64_t i = 0;; ++i) {
        const std::optional<std::optional<std::uint64_t>> got = co_await racing_stop_every_third(watch_next(rx), i, cancelled);
        if (!got) continue;  // cancelled: marked nothing seen
        if (!*got) break;    // the sender is gone
        if (**got < last) co_return 0;
        last = **got;
    }
    co_return last;
}

Task<void> wait_watch(eddy::watch::Receiver<int> rx, std::atomic<int>& waiting, eddy::test::Counted) {
    waiting.fetch_add(1);
    co_await rx.changed();
}
Task<void> wait_broadcast(eddy::broadcast::Receiver<int> rx, std::atomic<int>& waiting, eddy::test::Counted) {
    waiting.fetch_add(1);
    (void)co_await rx.receive();
}
Task<void> wait_unbounded(eddy::UnboundedChannel<int>& ch, std::atomic<int>& waiting, eddy::test::Counted) {
    waiting.fetch_add(1);
    (void)co_await ch.receive();
}

} // namespace

TEST_SUITE("stress/sync") {

TEST_CASE("an unbounded channel fed by tasks and a plain thread, receives cancelled at random, loses and duplicates nothing") {
    for_each_configuration([](std::size_t workers) {
        eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
        eddy::UnboundedChannel<std::uint64_t> ch;
        std::atomic<std::uint64_t> cancelled{0};
        std::vector<JoinHandle<std::pair<std::uint64_t, std::uint64_t>>> consumers;
        for (std::uint64_t i = 0; i < kConsumers; ++i) consumers.push_back(rt.spawn(consumer(ch, cancelled)));
        std::thread feeder([&ch] {  // producer number kProducers, off the runtime
            for (std::uint64_t i = 0; i < kPerProducer; ++i) ch.send(kProducers * kPerProducer + i + 1);
        });
        const auto [sum, count] = rt.block_on(
            [](eddy::UnboundedChannel<std::uint64_t>& ch, std::thread& feeder,
               std::vector<JoinHandle<std::pair<std::uint64_t, std::uint64_t>>>& consumers)
                -> Task<std::pair<std::uint64_t, std::uint64_t>> {
                std::vector<JoinHandle<void>> producers;
                for (std::uint64_t i = 0; i < kProducers; ++i) producers.push_back(eddy::spawn(unbounded_producer(ch, i)));
                for (auto& p : producers) co_await std::move(p);
                feeder.join();  // quick by now: its sends never wait
                ch.close();
                std::uint64_t sum = 0, count = 0;
                for (auto& c : consumers) {
                    const auto [s, n] = co_await std::move(c);
                    sum += s;
                    count += n;
                }
                co_return std::pair{sum, count};
            }(ch, feeder, consumers));
        constexpr std::uint64_t kAll = (kProducers + 1) * kPerProducer;
        CHECK(count == kAll);
        CHECK(sum == kAll * (kAll + 1) / 2);
        CHECK(ch.size() == 0);
    });
}

TEST_CASE("broadcast receivers with receives cancelled at random account for every value: received or reported lost") {
    for_each_configuration([](std::size_t workers) {
        eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
        auto [tx, rx] = eddy::broadcast::channel<std::uint64_t>(16);  // small: receivers lag
        std::atomic<std::uint64_t> cancelled{0};
        constexpr std::uint64_t kAll = kPerProducer * 2;
        std::vector<JoinHandle<Tally>> receivers;
        for (std::uint64_t i = 1; i < kConsumers; ++i) receivers.push_back(rt.spawn(broadcast_consumer(tx.subscribe(), cancelled)));
        receivers.push_back(rt.spawn(broadcast_consumer(std::move(rx), cancelled)));
        rt.block_on([](eddy::broadcast::Sender<std::uint64_t> tx) -> Task<void> {
            for (std::uint64_t v = 1; v <= kAll; ++v) {
                tx.send(v);
                if (v % 8 == 0) co_await eddy::yield_now();
            }
        }(std::move(tx)));  // the only sender ends with the task: the stream ends
        for (auto& h : receivers) {
            const Tally t = rt.block_on([](JoinHandle<Tally> h) -> Task<Tally> { co_return co_await std::move(h); }(std::move(h)));
            CHECK(t.wrong == 0);
            CHECK(t.received + t.missed == kAll);
            CHECK(t.last == kAll);  // the last value is never lost
        }
    });
}

TEST_CASE("watch receivers with changed() cancelled at random never go backwards and all see the last value") {
    for_each_configuration([](std::size_t workers) {
        eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
        auto [tx, rx] = eddy::watch::channel<std::uint64_t>(0);
        std::atomic<std::uint64_t> cancelled{0};
        constexpr std::uint64_t kAll = kPerProducer * 2;
        std::vector<JoinHandle<std::uint64_t>> followers;
        for (std::uint64_t i = 0; i < kConsumers; ++i) followers.push_back(rt.spawn(watch_follower(rx, cancelled)));
        { eddy::watch::Receiver<std::uint64_t> dropped = std::move(rx); }
        rt.block_on([](eddy::watch::Sender<std::uint64_t> tx) -> Task<void> {
            for (std::uint64_t v = 1; v <= kAll; ++v) {
                if (v % 2 == 0) {
                    tx.send(v);
                } else {
                    tx.send_modify([v](std::uint64_t& x) { x = v; });
                }
                if (v % 8 == 0) co_await eddy::yield_now();
            }
        }(std::move(tx)));  // the sender is dropped: the followers end after the last value
        for (auto& h : followers) {
            const std::uint64_t last =
                rt.block_on([](JoinHandle<std::uint64_t> h) -> Task<std::uint64_t> { co_return co_await std::move(h); }(std::move(h)));
            CHECK(last == kAll);
        }
    });
}

TEST_CASE("a runtime destroyed while tasks wait on watch, broadcast and unbounded channels unlinks every waiter") {
    // The channels outlive the runtime: their queues must not point into destroyed frames
    // (ASan would see the sends below touch freed memory).
    for_each_configuration([](std::size_t workers) {
        eddy::test::LifetimeCounter frames;
        auto [wtx, wrx] = eddy::watch::channel<int>(0);
        auto [btx, brx] = eddy::broadcast::channel<int>(4);
        eddy::UnboundedChannel<int> u;
        {
            eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
            std::atomic<int> waiting{0};
            for (int i = 0; i < 10; ++i) {
                (void)rt.spawn(wait_watch(wrx, waiting, eddy::test::Counted(frames)));
                (void)rt.spawn(wait_broadcast(btx.subscribe(), waiting, eddy::test::Counted(frames)));
                (void)rt.spawn(wait_unbounded(u, waiting, eddy::test::Counted(frames)));
            }
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
            while (waiting.load() < 30 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
            CHECK(waiting.load() == 30);
        }
        CHECK(frames.alive() == 0);
        CHECK(wtx.receiver_count() == 1);
        CHECK(btx.receiver_count() == 1);
        wtx.send(1);
        CHECK(btx.send(1) == 1);
        u.send(1);
        CHECK(u.size() == 1);
        CHECK(*wrx.borrow() == 1);
        CHECK(brx.try_receive() == 1);
        u.close();
        CHECK(u.try_receive() == 1);
    });
}

} // TEST_SUITE
