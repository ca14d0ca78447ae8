// tests/stress/runtime_stress_test.cpp: the whole runtime under load, through the public API.
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

#include <eddy/eddy.hpp>

#include "support/counted.hpp"
#include "support/stress_rounds.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

using eddy::JoinHandle;
using eddy::Task;
using eddy::test::Counted;
using eddy::test::LifetimeCounter;

namespace {

// Sizes: the whole file stays well within a minute in a TSan build on 2 cores (measured:
// about 4 s there, and about 2 s in a release build).
#ifdef EDDY_TEST_TSAN
constexpr int kRounds = 8;
constexpr int kTreeDepth = 12;           // 8191 spawned tasks and 4096 detached ones
constexpr int kExternalPerThread = 5000;  // per outside thread
#else
constexpr int kRounds = 20;
constexpr int kTreeDepth = 13;
constexpr int kExternalPerThread = 20000;
#endif
constexpr int kFanOut = 1000;
constexpr int kYieldTasks = 500;
constexpr int kYieldsEach = 100;
constexpr std::size_t kWorkerCounts[] = {1, 2, 8};  // EDDY_STRESS_WORKERS overrides

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
    explicit Ctx(std::size_t workers) : workers(workers) {}
    const std::size_t workers;
    LifetimeCounter frames;
    Tally detached_done;    // detached tasks that ran to their end
    Tally unhandled_boom;     // on_unhandled_exception calls with a Boom
    Tally unhandled_stopped;  // ... with RuntimeStopped (a spawn inside a task during shutdown)
    Tally unhandled_other;    // ... with anything else
    Tally started;          // tasks (of the shutdown cases) that reached their first suspension
    std::atomic<long> wrong_worker{0};  // a task saw this_worker::index() out of range
    std::atomic<long> yields{0};
    std::atomic<long> misordered{0};    // when_all results out of argument order

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

// ---- Tasks -----------------------------------------------------------------------------

Task<void> detached_leaf(Ctx& ctx, Counted) {
    ctx.check_worker();
    ctx.detached_done.add();
    co_return;
}

/// A binary tree of spawned tasks; each leaf also starts one detached task. Returns the
/// number of tree nodes.
Task<long> tree(Ctx& ctx, Counted, int depth) {
    ctx.check_worker();
    if (depth == 0) {
        eddy::spawn(detached_leaf(ctx, ctx.life())).detach();
        co_return 1;
    }
    JoinHandle<long> left = eddy::spawn(tree(ctx, ctx.life(), depth - 1));
    JoinHandle<long> right = eddy::spawn(tree(ctx, ctx.life(), depth - 1));
    if (depth % 3 == 0) co_await eddy::yield_now();
    const long l = co_await std::move(left);
    const long r = co_await std::move(right);
    co_return 1 + l + r;
}

Task<int> value_of(Ctx& ctx, Counted, int v) {
    ctx.check_worker();
    if (v % 7 == 0) co_await eddy::yield_now();
    co_return v;
}

/// Spawned from outside and detached: spawns one more detached task from inside.
Task<void> detached_spawner(Ctx& ctx, Counted) {
    ctx.check_worker();
    eddy::spawn(detached_leaf(ctx, ctx.life())).detach();
    ctx.detached_done.add();
    co_return;
}

Task<long> sum_handles(Ctx& ctx, Counted, std::vector<JoinHandle<int>> handles) {
    ctx.check_worker();
    long sum = 0;
    for (auto& h : handles) sum += co_await std::move(h);
    co_return sum;
}

Task<int> child(Ctx& ctx, Counted, int i) {
    ctx.check_worker();
    if (i % 3 == 0) co_await eddy::yield_now();
    co_return i;
}

Task<void> nothing(Ctx& ctx, Counted) {
    ctx.check_worker();
    co_await eddy::yield_now();
}

/// when_all over `n` children; returns their sum after checking the order of the results.
Task<long> fan_out(Ctx& ctx, Counted, int n) {
    std::vector<Task<int>> children;
    children.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) children.push_back(child(ctx, ctx.life(), i));
    const std::vector<int> results = co_await eddy::when_all(std::move(children));
    long sum = 0;
    for (int i = 0; i < n; ++i) {
        if (results[static_cast<std::size_t>(i)] != i) ctx.misordered.fetch_add(1, std::memory_order_relaxed);
        sum += results[static_cast<std::size_t>(i)];
    }
    co_return sum;
}

/// when_all of when_alls: ten groups of a hundred, then a tuple of three different types.
Task<long> nested_fan_out(Ctx& ctx, Counted) {
    std::vector<Task<long>> groups;
    for (int g = 0; g < 10; ++g) groups.push_back(fan_out(ctx, ctx.life(), 100));
    const std::vector<long> sums = co_await eddy::when_all(std::move(groups));
    long total = 0;
    for (long s : sums) total += s;
    auto [big, unit, single] =
        co_await eddy::when_all(fan_out(ctx, ctx.life(), kFanOut), nothing(ctx, ctx.life()), child(ctx, ctx.life(), 42));
    static_assert(std::is_same_v<decltype(unit), std::monostate>);
    co_return total + big + single;
}

Task<int> thrower(Ctx& ctx, Counted, int i) {
    ctx.check_worker();
    if (i % 2 == 1) co_await eddy::yield_now();
    if (i >= 0) throw Boom("boom " + std::to_string(i));
    co_return i;
}

struct ExceptionCounts {
    int caught_from_handles = 0;
    int caught_from_tasks = 0;
    int caught_from_when_all = 0;
};

/// Throws in every way a task can; returns what the awaiters caught. Also starts
/// `detached_early` throwing tasks whose handles are dropped at once, and `detached_late`
/// ones whose handles are dropped after they finished: each must reach the hook once.
Task<ExceptionCounts> exceptions(Ctx& ctx, Counted, int n, int detached_early, int detached_late) {
    ExceptionCounts counts;
    for (int i = 0; i < n; ++i) {
        JoinHandle<int> h = eddy::spawn(thrower(ctx, ctx.life(), i));
        try {
            (void)co_await std::move(h);
        } catch (const Boom&) {
            ++counts.caught_from_handles;
        }
        try {
            (void)co_await thrower(ctx, ctx.life(), i);
        } catch (const Boom&) {
            ++counts.caught_from_tasks;
        }
    }
    for (int i = 0; i < n / 10; ++i) {
        std::vector<Task<int>> children;
        // if/else, not ?: : clang 14 -O2 -g crashes (SimplifyCFG) on a conditional of two
        // coroutine calls with Counted temporaries.
        for (int c = 0; c < 10; ++c) {
            if (c % 4 == 0)
                children.push_back(thrower(ctx, ctx.life(), c));
            else
                children.push_back(child(ctx, ctx.life(), c));
        }
        try {
            (void)co_await eddy::when_all(std::move(children));
        } catch (const Boom&) {
            ++counts.caught_from_when_all;
        }
    }
    for (int i = 0; i < detached_early; ++i) eddy::spawn(thrower(ctx, ctx.life(), i)).detach();
    for (int i = 0; i < detached_late; ++i) {
        JoinHandle<int> h = eddy::spawn(thrower(ctx, ctx.life(), i));
        while (!h.is_finished()) co_await eddy::yield_now();
        // Dropped finished and unobserved: reported here, by the handle.
    }
    co_return counts;
}

Task<void> yielder(Ctx& ctx, Counted, int n) {
    for (int i = 0; i < n; ++i) {
        co_await eddy::yield_now();
        ctx.check_worker();
        ctx.yields.fetch_add(1, std::memory_order_relaxed);
    }
}

Task<void> yield_storm(Ctx& ctx, Counted, int tasks, int yields_each) {
    std::vector<JoinHandle<void>> handles;
    for (int i = 0; i < tasks; ++i) handles.push_back(eddy::spawn(yielder(ctx, ctx.life(), yields_each)));
    for (auto& h : handles) co_await std::move(h);
}

// ---- Tasks that never finish (shutdown cases) ------------------------------------------

Task<void> forever(Ctx& ctx, Counted) {
    ctx.started.add();
    for (;;) co_await eddy::yield_now();
}

/// Awaits a spawned task that never finishes.
Task<void> await_forever(Ctx& ctx, Counted) {
    JoinHandle<void> h = eddy::spawn(forever(ctx, ctx.life()));
    ctx.started.add();
    co_await std::move(h);
}

/// A chain of spawned tasks, each awaiting the next; the last one never finishes.
Task<void> await_chain(Ctx& ctx, Counted, int depth) {
    if (depth == 0) {
        co_await forever(ctx, ctx.life());  // awaited directly, not spawned
        co_return;
    }
    JoinHandle<void> next = eddy::spawn(await_chain(ctx, ctx.life(), depth - 1));
    ctx.started.add();
    co_await std::move(next);
}

/// A when_all whose children mostly finish, but one never does.
Task<void> when_all_forever(Ctx& ctx, Counted) {
    ctx.started.add();
    std::vector<Task<void>> children;
    for (int i = 0; i < 20; ++i) {
        if (i == 7)
            children.push_back(forever(ctx, ctx.life()));  // if/else, not ?: (see exceptions())
        else
            children.push_back(nothing(ctx, ctx.life()));
    }
    co_await eddy::when_all(std::move(children));
}

/// Holds a task that was never started, and a handle to a finished task that threw, while
/// yielding forever: shutdown destroys the unstarted frame and reports the unobserved error.
Task<void> holder(Ctx& ctx, Counted) {
    Task<int> never_started = child(ctx, ctx.life(), 1);
    JoinHandle<int> failed = eddy::spawn(thrower(ctx, ctx.life(), 0));
    while (!failed.is_finished()) co_await eddy::yield_now();
    ctx.started.add();
    for (;;) co_await eddy::yield_now();
}

/// Runs `body(workers)` for every worker count, kRounds times each, under a Watchdog.
template <class Body>
void for_each_configuration(Body body) {
    eddy::test::for_each_stress_configuration("runtime_stress", kWorkerCounts, kRounds, body);
}

} // namespace

TEST_SUITE("stress/runtime_stress") {

TEST_CASE("a tree of tasks spawned from inside tasks returns every node and runs every detached leaf") {
    for_each_configuration([](std::size_t workers) {
        Ctx ctx(workers);
        constexpr long kNodes = (2L << kTreeDepth) - 1;
        constexpr long kLeaves = 1L << kTreeDepth;
        {
            eddy::Runtime rt(config_for(ctx));
            CHECK(rt.block_on(tree(ctx, ctx.life(), kTreeDepth)) == kNodes);
            CHECK(ctx.detached_done.wait_for_at_least(kLeaves));
        }
        CHECK(ctx.detached_done.value() == kLeaves);
        CHECK(ctx.unhandled_stopped.value() == 0);
        CHECK(ctx.unhandled_other.value() == 0);
        CHECK(ctx.wrong_worker.load() == 0);
        CHECK(ctx.frames.alive() == 0);
        CHECK(ctx.frames.constructions() > 0);
    });
}

TEST_CASE("tasks spawned from two outside threads at once all run, awaited or detached") {
    for_each_configuration([](std::size_t workers) {
        Ctx ctx(workers);
        long sums[2] = {0, 0};
        {
            eddy::Runtime rt(config_for(ctx));
            std::vector<std::thread> outside;
            for (int t = 0; t < 2; ++t) {
                outside.emplace_back([&rt, &ctx, &sums, t] {
                    std::vector<JoinHandle<int>> kept;
                    for (int i = 0; i < kExternalPerThread; ++i) {
                        if (i % 2 == 0) {
                            kept.push_back(rt.spawn(value_of(ctx, ctx.life(), t * kExternalPerThread + i)));
                        } else {
                            // Dropped at once, often while the task runs on a worker.
                            (void)rt.spawn(detached_spawner(ctx, ctx.life()));
                        }
                    }
                    sums[t] = rt.block_on(sum_handles(ctx, ctx.life(), std::move(kept)));
                });
            }
            for (auto& t : outside) t.join();
            // Each detached_spawner counts itself and the leaf it spawns.
            CHECK(ctx.detached_done.wait_for_at_least(2L * 2 * (kExternalPerThread / 2)));
        }
        for (int t = 0; t < 2; ++t) {
            long expected = 0;
            for (int i = 0; i < kExternalPerThread; i += 2) expected += t * kExternalPerThread + i;
            CHECK(sums[t] == expected);
        }
        CHECK(ctx.detached_done.value() == 2L * 2 * (kExternalPerThread / 2));
        CHECK(ctx.unhandled_stopped.value() == 0);
        CHECK(ctx.unhandled_other.value() == 0);
        CHECK(ctx.wrong_worker.load() == 0);
        CHECK(ctx.frames.alive() == 0);
    });
}

TEST_CASE("when_all fan-outs of a thousand children and nested when_alls return every result in order") {
    for_each_configuration([](std::size_t workers) {
        Ctx ctx(workers);
        {
            eddy::Runtime rt(config_for(ctx));
            CHECK(rt.block_on(fan_out(ctx, ctx.life(), kFanOut)) == long{kFanOut} * (kFanOut - 1) / 2);
            const long groups = 10L * (100 * 99 / 2);
            CHECK(rt.block_on(nested_fan_out(ctx, ctx.life())) == groups + long{kFanOut} * (kFanOut - 1) / 2 + 42);
        }
        CHECK(ctx.misordered.load() == 0);
        CHECK(ctx.wrong_worker.load() == 0);
        CHECK(ctx.frames.alive() == 0);
    });
}

TEST_CASE("exceptions reach their awaiters, and each detached one reaches on_unhandled_exception once") {
    for_each_configuration([](std::size_t workers) {
        Ctx ctx(workers);
        constexpr int kThrowers = 200;
        constexpr int kDetachedEarly = 100;
        constexpr int kDetachedLate = 50;
        ExceptionCounts counts;
        {
            eddy::Runtime rt(config_for(ctx));
            counts = rt.block_on(exceptions(ctx, ctx.life(), kThrowers, kDetachedEarly, kDetachedLate));
            CHECK(ctx.unhandled_boom.wait_for_at_least(kDetachedEarly + kDetachedLate));
            // block_on rethrows too.
            CHECK_THROWS_AS(rt.block_on(thrower(ctx, ctx.life(), 3)), Boom);
        }
        CHECK(counts.caught_from_handles == kThrowers);
        CHECK(counts.caught_from_tasks == kThrowers);
        CHECK(counts.caught_from_when_all == kThrowers / 10);
        CHECK(ctx.unhandled_boom.value() == kDetachedEarly + kDetachedLate);
        CHECK(ctx.unhandled_stopped.value() == 0);
        CHECK(ctx.unhandled_other.value() == 0);
        CHECK(ctx.wrong_worker.load() == 0);
        CHECK(ctx.frames.alive() == 0);
    });
}

TEST_CASE("many tasks looping on yield_now all finish every iteration") {
    for_each_configuration([](std::size_t workers) {
        Ctx ctx(workers);
        {
            eddy::Runtime rt(config_for(ctx));
            rt.block_on(yield_storm(ctx, ctx.life(), kYieldTasks, kYieldsEach));
        }
        CHECK(ctx.yields.load() == long{kYieldTasks} * kYieldsEach);
        CHECK(ctx.wrong_worker.load() == 0);
        CHECK(ctx.frames.alive() == 0);
    });
}

TEST_CASE("destroying a runtime with tasks that never finish destroys every frame without hanging") {
    for_each_configuration([](std::size_t workers) {
        Ctx ctx(workers);
        constexpr int kForeverOutside = 20;
        constexpr int kChainDepth = 10;
        std::vector<JoinHandle<void>> outlive;  // handles that outlive their runtime
        {
            eddy::Runtime rt(config_for(ctx));
            long expected_started = 0;
            for (int i = 0; i < kForeverOutside; ++i) outlive.push_back(rt.spawn(forever(ctx, ctx.life())));
            expected_started += kForeverOutside;
            for (int i = 0; i < 10; ++i) (void)rt.spawn(await_forever(ctx, ctx.life()));
            expected_started += 2 * 10;
            outlive.push_back(rt.spawn(await_chain(ctx, ctx.life(), kChainDepth)));
            expected_started += kChainDepth + 1;
            for (int i = 0; i < 5; ++i) (void)rt.spawn(when_all_forever(ctx, ctx.life()));
            expected_started += 2 * 5;
            (void)rt.spawn(holder(ctx, ctx.life()));
            expected_started += 1;
            // Everything is suspended somewhere (a queue, a yield list, a JoinHandle, a
            // when_all) before the runtime goes away.
            CHECK(ctx.started.wait_for_at_least(expected_started));
            CHECK(ctx.unhandled_boom.value() == 0);
        }
        // The holder's unobserved exception was reported once, when shutdown destroyed it.
        CHECK(ctx.unhandled_boom.value() == 1);
        CHECK(ctx.unhandled_stopped.value() == 0);
        CHECK(ctx.unhandled_other.value() == 0);
        for (auto& h : outlive) CHECK(h.is_finished());  // cancelled counts as finished
        outlive.clear();
        CHECK(ctx.frames.alive() == 0);
    });
}

TEST_CASE("block_on of a task that never finishes throws RuntimeStopped when another thread shuts down") {
    for_each_configuration([](std::size_t workers) {
        Ctx ctx(workers);
        bool stopped = false;
        {
            eddy::Runtime rt(config_for(ctx));
            std::thread blocked([&] {
                try {
                    rt.block_on(forever(ctx, ctx.life()));
                } catch (const eddy::RuntimeStopped&) {
                    stopped = true;
                }
            });
            CHECK(ctx.started.wait_for_at_least(1));
            rt.shutdown();
            blocked.join();
            CHECK_THROWS_AS(rt.spawn(child(ctx, ctx.life(), 1)), eddy::RuntimeStopped);
            CHECK_THROWS_AS(rt.block_on(child(ctx, ctx.life(), 1)), eddy::RuntimeStopped);
        }
        CHECK(stopped);
        CHECK(ctx.unhandled_stopped.value() == 0);
        CHECK(ctx.unhandled_other.value() == 0);
        CHECK(ctx.frames.alive() == 0);
    });
}

TEST_CASE("spawns from outside threads racing shutdown either run or are destroyed, never leaked") {
    for_each_configuration([](std::size_t workers) {
        Ctx ctx(workers);
        std::atomic<long> accepted{0};
        std::atomic<long> refused{0};
        {
            eddy::Runtime rt(config_for(ctx));
            std::vector<std::thread> outside;
            for (int t = 0; t < 2; ++t) {
                outside.emplace_back([&] {
                    // Bounded: shutdown refuses spawns long before this many.
                    for (int i = 0; i < 1'000'000; ++i) {
                        try {
                            // Half never finish, so shutdown finds them in every state.
                            if (i % 2 == 0)
                                (void)rt.spawn(detached_spawner(ctx, ctx.life()));
                            else
                                (void)rt.spawn(forever(ctx, ctx.life()));
                            accepted.fetch_add(1, std::memory_order_relaxed);
                        } catch (const eddy::RuntimeStopped&) {
                            refused.fetch_add(1, std::memory_order_relaxed);
                            return;
                        }
                    }
                });
            }
            CHECK(ctx.started.wait_for_at_least(100));  // some tasks are running by now
            rt.shutdown();
            for (auto& t : outside) t.join();
        }
        CHECK(accepted.load() > 0);
        CHECK(refused.load() == 2);
        // A detached_spawner caught by shutdown between its start and its eddy::spawn gets
        // RuntimeStopped from that spawn (documented), which escapes it and is reported:
        // ctx.unhandled_stopped may be anything. Nothing else may be reported.
        CHECK(ctx.unhandled_boom.value() == 0);
        CHECK(ctx.unhandled_other.value() == 0);
        CHECK(ctx.frames.alive() == 0);
    });
}

} // TEST_SUITE
