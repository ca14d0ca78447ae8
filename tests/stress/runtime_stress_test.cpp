// tests/stress/runtime_stress_test.cpp: the whole runtime under load, through the public API:
// trees of spawned tasks, spawns from outside threads, when_all fan-outs, exceptions in every
// way a task can throw them, and yield storms. tests/stress/runtime_stress.hpp describes the
// rounds and how frames and detached work are counted; runtime_shutdown_stress_test.cpp
// destroys runtimes with work in flight.

#include <eddy/eddy.hpp>

#include "stress/runtime_stress.hpp"
#include "support/counted.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

using eddy::JoinHandle;
using eddy::Task;
using eddy::test::Counted;
using namespace eddy::test::runtime_stress;

namespace {

constexpr const char* kProgram = "runtime_stress";

// Sizes: this program and runtime_shutdown_stress together stay well within a minute in a
// TSan build on 2 cores (measured: about 4 s there, and about 2 s in a release build).
#ifdef EDDY_TEST_TSAN
constexpr int kTreeDepth = 12;            // 8191 spawned tasks and 4096 detached ones
constexpr int kExternalPerThread = 5000;  // per outside thread
#else
constexpr int kTreeDepth = 13;
constexpr int kExternalPerThread = 20000;
#endif
constexpr int kFanOut = 1000;
constexpr int kYieldTasks = 500;
constexpr int kYieldsEach = 100;

// ---- Tasks -----------------------------------------------------------------------------

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

Task<long> sum_handles(Ctx& ctx, Counted, std::vector<JoinHandle<int>> handles) {
    ctx.check_worker();
    long sum = 0;
    for (auto& h : handles) sum += co_await std::move(h);
    co_return sum;
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
    auto [big, unit, single] = co_await eddy::when_all(fan_out(ctx, ctx.life(), kFanOut), nothing(ctx, ctx.life()),
                                                       child(ctx, ctx.life(), 42));
    static_assert(std::is_same_v<decltype(unit), std::monostate>);
    co_return total + big + single;
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
            if (c % 4 == 0) children.push_back(thrower(ctx, ctx.life(), c));
            else children.push_back(child(ctx, ctx.life(), c));
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

}  // namespace

TEST_SUITE("stress/runtime_stress") {

TEST_CASE("a tree of tasks spawned from inside tasks returns every node and runs every detached leaf") {
    for_each_configuration(kProgram, [](std::size_t workers) {
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
    for_each_configuration(kProgram, [](std::size_t workers) {
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
    for_each_configuration(kProgram, [](std::size_t workers) {
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
    for_each_configuration(kProgram, [](std::size_t workers) {
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
    for_each_configuration(kProgram, [](std::size_t workers) {
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

}  // TEST_SUITE("stress/runtime_stress")
