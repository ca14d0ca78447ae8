// tests/stress/sync_lock_stress_test.cpp: the locks and signals (Mutex, Semaphore, RwLock,
// Notify, Barrier) under load, with cancellations racing grants.
//
// Outcomes are checked exactly: every lock taken is counted, every permit is accounted for,
// every notification is delivered once or stored, every barrier generation is complete.
// tests/stress/sync_stress.hpp gives the worker counts and rounds.

#include <eddy/eddy.hpp>

#include "stress/sync_stress.hpp"
#include "support/notify_probe.hpp"
#include "support/sync_helpers.hpp"

#include <doctest/doctest.h>

#include <atomic>
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
using eddy::test::sync_stress::for_each_configuration;

namespace {

constexpr const char* kProgram = "sync_lock_stress";

/// Takes the mutex `n` times, each time also a permit, some of the takes under a token that
/// is stopped concurrently; counts the successful ones in the plain int under the lock.
Task<long> locker(eddy::Mutex& m, eddy::Semaphore& s, long& plain, int n) {
    long mine = 0;
    for (int i = 0; i < n; ++i) {
        std::stop_source stop;
        auto take = [](eddy::Mutex& mutex, eddy::Semaphore& sem, long& counter) -> Task<void> {
            co_await sem.acquire();
            try {
                eddy::MutexGuard g = co_await mutex.lock();
                const long seen = counter;
                co_await eddy::yield_now();
                counter = seen + 1;
            } catch (...) {
                sem.release();
                throw;
            }
            sem.release();
        };
        if (i % 4 == 0) stop.request_stop();  // some stops come before the wait, some during
        JoinHandle<void> stopper = eddy::spawn([](std::stop_source source) -> Task<void> {
            source.request_stop();
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
            auto arrive = [](eddy::Barrier& barrier, bool& led) -> Task<void> {
                led = (co_await barrier.arrive_and_wait()).is_leader();
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

}  // namespace

TEST_SUITE("stress/sync") {

TEST_CASE("a mutex and a semaphore with waits cancelled at random keep exact counts") {
    for_each_configuration(kProgram, [](std::size_t workers) {
        eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
        eddy::Mutex m;
        eddy::Semaphore s(3);
        long plain = 0;
        constexpr int kTasks = 16, kEach = 40;
        const long taken = rt.block_on([](eddy::Mutex& mutex, eddy::Semaphore& sem, long& counter) -> Task<long> {
            std::vector<JoinHandle<long>> all;
            for (int i = 0; i < kTasks; ++i) all.push_back(eddy::spawn(locker(mutex, sem, counter, kEach)));
            long sum = 0;
            for (auto& h : all) sum += co_await std::move(h);
            co_return sum;
        }(m, s, plain));
        CHECK(taken >= kTasks * kEach / 2);  // the uncancellable half always succeeds
        CHECK(plain == taken);
        CHECK_FALSE(m.is_locked());
        CHECK(s.available() == 3);
    });
}

TEST_CASE("an rwlock with reads and writes cancelled at random: no reader while a writer holds it, exact counts") {
    for_each_configuration(kProgram, [](std::size_t workers) {
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
        rt.block_on([](eddy::RwLock& lock, long& counter, RwCounts& counts) -> Task<void> {
            std::vector<JoinHandle<void>> all;
            for (int i = 0; i < kTasks; ++i)
                all.push_back(eddy::spawn(
                    rw_user(lock, counter, counts, 0x9e3779b9u * static_cast<std::uint32_t>(i + 1), kEach)));
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
    for_each_configuration(kProgram, [](std::size_t workers) {
        eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
        eddy::Notify n;
#ifdef EDDY_TEST_TSAN
        constexpr int kSteps = 60;
#else
        constexpr int kSteps = 300;
#endif
        const int bad = rt.block_on([](eddy::Notify& notify) -> Task<int> {
            int wrong = 0;
            Dice dice{12345};
            for (int step = 0; step < kSteps; ++step) {
                std::atomic<int> ok{0};
                const std::uint32_t waiters = 1 + dice.roll(4);
                std::vector<std::stop_source> stops(waiters);
                std::vector<JoinHandle<void>> all;
                for (auto& s : stops)
                    all.push_back(eddy::spawn(eddy::with_stop_token(notified(notify, ok), s.get_token())));
                for (std::uint32_t y = dice.roll(3); y > 0; --y) co_await eddy::yield_now();
                std::optional<std::thread> thread;
                if (step % 5 == 0) {
                    thread.emplace([&notify] { notify.notify_one(); });
                } else {
                    all.push_back(eddy::spawn([](eddy::Notify& target) -> Task<void> {
                        target.notify_one();
                        co_return;
                    }(notify)));
                }
                for (auto& s : stops) s.request_stop();
                for (auto& h : all) (void)co_await eddy::test::outcome(std::move(h));
                if (thread) thread->join();
                const std::string permit = co_await eddy::test::spend_permit(notify);
                if (ok.load() + (permit == "permit" ? 1 : 0) != 1) ++wrong;
            }
            co_return wrong;
        }(n));
        CHECK(bad == 0);
        CHECK(n.waiters() == 0);
    });
}

TEST_CASE("a barrier with arrivals cancelled at random counts its generations exactly") {
    for_each_configuration(kProgram, [](std::size_t workers) {
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
        rt.block_on([](eddy::Barrier& barrier, std::vector<std::atomic<int>>& arrivals,
                       std::vector<std::atomic<int>>& led, std::atomic<int>& incomplete,
                       std::atomic<long>& stops) -> Task<void> {
            std::vector<JoinHandle<void>> all;
            for (std::size_t i = 0; i < kMembers; ++i)
                all.push_back(eddy::spawn(barrier_member(barrier, arrivals, led, incomplete, stops,
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

}  // TEST_SUITE("stress/sync")
