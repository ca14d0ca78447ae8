// tests/stress/sync_stress_test.cpp: the synchronization primitives (Channel, Mutex,
// Semaphore, Event, RwLock, Notify, Barrier) under load, with cancellations racing grants, and
// runtimes destroyed while tasks wait on them.
//
// Every case runs for 1, 2 and 8 workers (8 is more than the CI machine's cores, on purpose:
// preempted workers make the races between a grant and a stop request common), several
// rounds each, with a fresh Runtime per round. Outcomes are checked exactly: every value
// sent is received once, every lock taken is counted, every permit is accounted for. A
// Watchdog per round names the round that hangs (a lost wake-up) instead of a meson timeout.

#include <eddy/eddy.hpp>

#include "support/counted.hpp"
#include "support/notify_probe.hpp"
#include "support/sync_helpers.hpp"
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

// --- RwLock, Notify, Barrier ---------------------------------------------------------------

namespace {

/// A small deterministic generator per task (xorshift32), so a failing round is reproducible.
struct Dice {
    std::uint32_t state;
    std::uint32_t roll(std::uint32_t sides) noexcept {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        return state % sides;
    }
};

/// Runs `task` under a token that is stopped before it starts (roll 0), by a concurrent task
/// after a few yields (rolls 1-2), or never (else). Returns false if it was cancelled.
Task<bool> maybe_cancelled(Task<void> task, Dice& dice) {
    std::stop_source stop;
    const std::uint32_t how = dice.roll(6);
    if (how == 0) stop.request_stop();
    JoinHandle<void> stopper = eddy::spawn([](std::stop_source s, std::uint32_t yields, bool stop_it) -> Task<void> {
        for (std::uint32_t i = 0; i < yields; ++i) co_await eddy::yield_now();
        if (stop_it) s.request_stop();
    }(stop, dice.roll(3), how <= 2));
    bool done = true;
    try {
        co_await eddy::with_stop_token(std::move(task), stop.get_token());
    } catch (const eddy::OperationCancelled&) {
        done = false;
    }
    co_await std::move(stopper);
    co_return done;
}

struct RwCounts {
    std::atomic<int> readers_in{0}, writers_in{0}, violations{0};
    std::atomic<long> reads{0}, writes{0}, cancelled{0};
};

/// Writes: increments the plain counter with a yield inside; checks that nobody else is in.
Task<void> rw_write(eddy::RwLock& l, long& plain, RwCounts& c) {
    eddy::RwLock::WriteGuard g = co_await l.write();
    if (c.writers_in.fetch_add(1) != 0 || c.readers_in.load() != 0) c.violations.fetch_add(1);
    const long seen = plain;
    co_await eddy::yield_now();
    plain = seen + 1;
    c.writers_in.fetch_sub(1);
}

/// Reads over a yield; checks that no writer is in, before and after.
Task<void> rw_read(eddy::RwLock& l, RwCounts& c) {
    eddy::RwLock::ReadGuard g = co_await l.read();
    c.readers_in.fetch_add(1);
    if (c.writers_in.load() != 0) c.violations.fetch_add(1);
    co_await eddy::yield_now();
    if (c.writers_in.load() != 0) c.violations.fetch_add(1);
    c.readers_in.fetch_sub(1);
}

/// `n` reads and writes (about one in four a write), some cancelled, counted by outcome.
Task<void> rw_user(eddy::RwLock& l, long& plain, RwCounts& c, std::uint32_t seed, int n) {
    Dice dice{seed};
    for (int i = 0; i < n; ++i) {
        const bool write = dice.roll(4) == 0;
        Task<void> op = write ? rw_write(l, plain, c) : rw_read(l, c);
        if (co_await maybe_cancelled(std::move(op), dice)) {
            (write ? c.writes : c.reads).fetch_add(1);
        } else {
            c.cancelled.fetch_add(1);
        }
    }
}

Task<void> notified(eddy::Notify& n, std::atomic<int>& ok) {
    co_await n.notified();
    ok.fetch_add(1);
}

/// One member of a barrier: `generations` arrivals, each retried until one is not cancelled;
/// checks that every member had arrived when a generation completes.
Task<void> barrier_member(eddy::Barrier& b, std::vector<std::atomic<int>>& arrived,
                          std::vector<std::atomic<int>>& leaders, std::atomic<int>& short_generations,
                          std::atomic<long>& cancelled, std::uint32_t seed) {
    Dice dice{seed};
    for (std::size_t g = 0; g < arrived.size(); ++g) {
        arrived[g].fetch_add(1);
        for (;;) {
            bool leader = false;
            auto arrive = [](eddy::Barrier& b, bool& leader) -> Task<void> {
                leader = (co_await b.arrive_and_wait()).is_leader();
            };
            if (co_await maybe_cancelled(arrive(b, leader), dice)) {
                if (leader) leaders[g].fetch_add(1);
                break;
            }
            cancelled.fetch_add(1);
        }
        if (arrived[g].load() != static_cast<int>(b.parties())) short_generations.fetch_add(1);
    }
}

Task<void> read_lock(eddy::RwLock& l, eddy::test::Counted) { eddy::RwLock::ReadGuard g = co_await l.read(); }
Task<void> write_lock(eddy::RwLock& l, eddy::test::Counted) { eddy::RwLock::WriteGuard g = co_await l.write(); }
Task<void> wait_notify(eddy::Notify& n, std::atomic<int>& ok, eddy::test::Counted) { co_await notified(n, ok); }
Task<void> arrive_barrier(eddy::Barrier& b, eddy::test::Counted) { (void)co_await b.arrive_and_wait(); }
} // namespace

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

TEST_CASE("an rwlock with reads and writes cancelled at random: no reader while a writer holds it, exact counts") {
    for_each_configuration([](std::size_t workers) {
        eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
        eddy::RwLock l;
        long plain = 0;
        RwCounts c;
        constexpr int kTasks = 16;
#ifdef EDDY_TEST_TSAN
        constexpr int kEach = 40;
#else
        constexpr int kEach = 150;
#endif
        rt.block_on([](eddy::RwLock& l, long& plain, RwCounts& c) -> Task<void> {
            std::vector<JoinHandle<void>> all;
            for (int i = 0; i < kTasks; ++i)
                all.push_back(eddy::spawn(rw_user(l, plain, c, 0x9e3779b9u * static_cast<std::uint32_t>(i + 1), kEach)));
            for (auto& h : all) co_await std::move(h);
        }(l, plain, c));
        CHECK(c.violations.load() == 0);
        CHECK(c.reads.load() + c.writes.load() + c.cancelled.load() == kTasks * kEach);
        CHECK(plain == c.writes.load());
        CHECK(c.writes.load() > 0);
        CHECK(c.reads.load() > 0);
        CHECK(c.cancelled.load() > 0);
        CHECK_FALSE(l.is_write_locked());
        CHECK(l.readers() == 0);
        CHECK(l.waiters() == 0);
    });
}

TEST_CASE("notify_one raced by stops on every waiter: delivered once or stored, never lost or doubled") {
    // Each step: a few waiters under tokens that are all stopped, racing one notify_one (from
    // a task, or from a plain thread). Every waiter ends, and exactly one of them returned
    // normally, or none did and the permit is stored.
    for_each_configuration([](std::size_t workers) {
        eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
        eddy::Notify n;
#ifdef EDDY_TEST_TSAN
        constexpr int kSteps = 60;
#else
        constexpr int kSteps = 300;
#endif
        const int bad = rt.block_on([](eddy::Notify& n) -> Task<int> {
            int bad = 0;
            Dice dice{12345};
            for (int step = 0; step < kSteps; ++step) {
                std::atomic<int> ok{0};
                const std::uint32_t waiters = 1 + dice.roll(4);
                std::vector<std::stop_source> stops(waiters);
                std::vector<JoinHandle<void>> all;
                for (auto& s : stops) all.push_back(eddy::spawn(eddy::with_stop_token(notified(n, ok), s.get_token())));
                for (std::uint32_t y = dice.roll(3); y > 0; --y) co_await eddy::yield_now();
                std::optional<std::thread> thread;
                if (step % 5 == 0) {
                    thread.emplace([&n] { n.notify_one(); });
                } else {
                    all.push_back(eddy::spawn([](eddy::Notify& n) -> Task<void> {
                        n.notify_one();
                        co_return;
                    }(n)));
                }
                for (auto& s : stops) s.request_stop();
                for (auto& h : all) (void)co_await eddy::test::outcome(std::move(h));
                if (thread) thread->join();
                const std::string permit = co_await eddy::test::spend_permit(n);
                if (ok.load() + (permit == "permit" ? 1 : 0) != 1) ++bad;
            }
            co_return bad;
        }(n));
        CHECK(bad == 0);
        CHECK(n.waiters() == 0);
    });
}

TEST_CASE("a barrier with arrivals cancelled at random counts its generations exactly") {
    for_each_configuration([](std::size_t workers) {
        eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
        constexpr std::size_t kMembers = 6;
#ifdef EDDY_TEST_TSAN
        constexpr std::size_t kGenerations = 40;
#else
        constexpr std::size_t kGenerations = 200;
#endif
        eddy::Barrier b(kMembers);
        std::vector<std::atomic<int>> arrived(kGenerations), leaders(kGenerations);
        std::atomic<int> short_generations{0};
        std::atomic<long> cancelled{0};
        rt.block_on([](eddy::Barrier& b, std::vector<std::atomic<int>>& arrived, std::vector<std::atomic<int>>& leaders,
                       std::atomic<int>& short_generations, std::atomic<long>& cancelled) -> Task<void> {
            std::vector<JoinHandle<void>> all;
            for (std::size_t i = 0; i < kMembers; ++i)
                all.push_back(eddy::spawn(barrier_member(b, arrived, leaders, short_generations, cancelled,
                                                         0x85ebca6bu * static_cast<std::uint32_t>(i + 1))));
            for (auto& h : all) co_await std::move(h);
        }(b, arrived, leaders, short_generations, cancelled));
        CHECK(short_generations.load() == 0);
        std::size_t wrong = 0;
        for (auto& l : leaders) wrong += l.load() == 1 ? 0 : 1;
        CHECK(wrong == 0);
        CHECK(b.generation() == kGenerations);
        CHECK(b.waiting() == 0);
        CHECK(cancelled.load() > 0);
    });
}

TEST_CASE("a runtime destroyed while tasks wait on an rwlock, a notify or a barrier unlinks every waiter") {
    for_each_configuration([](std::size_t workers) {
        eddy::test::LifetimeCounter frames;
        eddy::RwLock l, handed;
        eddy::Notify n;
        eddy::Barrier b(11);
        std::atomic<int> woken{0};
        std::optional<eddy::RwLock::WriteGuard> held = l.try_write();
        std::optional<eddy::RwLock::WriteGuard> to_hand = handed.try_write();
        {
            eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
            for (int i = 0; i < 10; ++i) {
                (void)rt.spawn(read_lock(l, eddy::test::Counted(frames)));
                (void)rt.spawn(write_lock(l, eddy::test::Counted(frames)));
                (void)rt.spawn((i % 2 == 0 ? read_lock : write_lock)(handed, eddy::test::Counted(frames)));
                (void)rt.spawn(wait_notify(n, woken, eddy::test::Counted(frames)));
                (void)rt.spawn(arrive_barrier(b, eddy::test::Counted(frames)));
            }
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
            while ((l.waiters() < 20 || handed.waiters() < 10 || n.waiters() < 10 || b.waiting() < 10) &&
                   std::chrono::steady_clock::now() < deadline)
                std::this_thread::yield();
            REQUIRE(l.waiters() == 20);
            REQUIRE(handed.waiters() == 10);
            REQUIRE(n.waiters() == 10);
            REQUIRE(b.waiting() == 10);
            // Handed over at once before the runtime goes: some granted frames never run.
            to_hand.reset();
            n.notify_one();
        }
        CHECK(frames.alive() == 0);
        CHECK(l.waiters() == 0);
        CHECK(n.waiters() == 0);
        CHECK(b.waiting() == 0);
        CHECK(b.generation() == 0);
        CHECK(handed.waiters() == 0);
        CHECK_FALSE(handed.is_write_locked());
        CHECK(handed.readers() == 0);
        held.reset();
        CHECK_FALSE(l.is_write_locked());
        // The notification went to a waiter that ran, or ends stored as the permit.
        eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
        const std::string permit = rt.block_on(eddy::test::spend_permit(n));
        CHECK(woken.load() + (permit == "permit" ? 1 : 0) == 1);
    });
}

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
