// tests/stress/runtime_stress.hpp: what the runtime stress tests (runtime_stress and
// runtime_shutdown_stress) share: the round loop, the round's context and the small tasks
// both spawn.
//
// Every case runs for 1, 2 and 8 workers (8 is more than the CI machine's cores, on purpose:
// preempted workers make the parking, stealing and wake-up races common), several rounds
// each, with a fresh Runtime per round so start-up and shutdown are repeated too. Outcomes
// are checked exactly: sums, counts of completions, counts of reported exceptions.
//
// Frame lifetimes: every task takes an eddy::test::Counted by value, so its copy lives in the
// coroutine frame. After the Runtime is destroyed (workers joined, unfinished tasks destroyed)
// `alive() == 0` proves that every frame, finished, detached, cancelled by shutdown or never
// started, was destroyed exactly once.
//
// Waiting for detached work: such tasks report to a Tally (a counter under a mutex with a
// condition variable), and the test thread blocks until the expected count; the wait has a
// very coarse time limit only so that a lost task fails the test instead of hanging it.
// Likewise a Watchdog per round ends the process, naming the case, worker count and round,
// if the round has not finished after a few minutes (a round takes well under a second): a
// lost task or a lost wake-up then shows up as a named failure instead of a meson timeout.
#pragma once

#include <eddy/eddy.hpp>

#include "support/counted.hpp"
#include "support/stress_rounds.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>

namespace eddy::test::runtime_stress {

#ifdef EDDY_TEST_TSAN
inline constexpr int kRounds = 8;
#else
inline constexpr int kRounds = 20;
#endif
inline constexpr std::size_t kWorkerCounts[] = {1, 2, 8};  // EDDY_STRESS_WORKERS overrides

/// A count that a thread can block on until it reaches a value.
class Tally {
public:
    void add(long n = 1) {
        std::lock_guard lock(mutex_);
        value_ += n;
        cv_.notify_all();  // under the lock: the waiter may destroy the Tally once it returns
    }
    long value() const {
        std::lock_guard lock(mutex_);
        return value_;
    }
    /// True once value() >= n; false after a very coarse limit (a lost task, not slowness).
    bool wait_for_at_least(long n) {
        std::unique_lock lock(mutex_);
        return cv_.wait_for(lock, std::chrono::minutes(2), [&] { return value_ >= n; });
    }

private:
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    long value_ = 0;  // guarded by mutex_
};

struct Boom : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// Everything a round's tasks report to. Declared before the Runtime, so it outlives it.
struct Ctx {
    explicit Ctx(std::size_t worker_count) : workers(worker_count) {}
    const std::size_t workers;
    LifetimeCounter frames;
    Tally detached_done;                // detached tasks that ran to their end
    Tally unhandled_boom;               // on_unhandled_exception calls with a Boom
    Tally unhandled_stopped;            // ... with RuntimeStopped (a spawn inside a task during shutdown)
    Tally unhandled_other;              // ... with anything else
    Tally started;                      // tasks (of the shutdown cases) that reached their first suspension
    std::atomic<long> wrong_worker{0};  // a task saw this_worker::index() out of range
    std::atomic<long> yields{0};
    std::atomic<long> misordered{0};  // when_all results out of argument order

    Counted life() { return Counted(frames); }
    void check_worker() {
        const auto i = eddy::this_worker::index();
        if (!i || *i >= workers) wrong_worker.fetch_add(1, std::memory_order_relaxed);
    }
};

eddy::RuntimeConfig config_for(Ctx& ctx) {
    return eddy::RuntimeConfig{
        .workers = ctx.workers,
        .on_unhandled_exception =
            [&ctx](std::exception_ptr e) {
                try {
                    std::rethrow_exception(e);
                } catch (const Boom&) {
                    ctx.unhandled_boom.add();
                } catch (const eddy::RuntimeStopped&) {
                    ctx.unhandled_stopped.add();
                } catch (...) {
                    ctx.unhandled_other.add();
                }
            },
    };
}

// ---- Tasks both programs spawn ---------------------------------------------------------

inline Task<void> detached_leaf(Ctx& ctx, Counted) {
    ctx.check_worker();
    ctx.detached_done.add();
    co_return;
}

/// Spawned from outside and detached: spawns one more detached task from inside.
inline Task<void> detached_spawner(Ctx& ctx, Counted) {
    ctx.check_worker();
    eddy::spawn(detached_leaf(ctx, ctx.life())).detach();
    ctx.detached_done.add();
    co_return;
}

inline Task<int> child(Ctx& ctx, Counted, int i) {
    ctx.check_worker();
    if (i % 3 == 0) co_await eddy::yield_now();
    co_return i;
}

inline Task<void> nothing(Ctx& ctx, Counted) {
    ctx.check_worker();
    co_await eddy::yield_now();
}

inline Task<int> thrower(Ctx& ctx, Counted, int i) {
    ctx.check_worker();
    if (i % 2 == 1) co_await eddy::yield_now();
    if (i >= 0) throw Boom("boom " + std::to_string(i));
    co_return i;
}

/// Runs `body(workers)` for every worker count, kRounds times each, under a Watchdog that
/// names `program`.
template <class Body>
void for_each_configuration(const char* program, Body body) {
    for_each_stress_configuration(program, kWorkerCounts, kRounds, body);
}

}  // namespace eddy::test::runtime_stress
