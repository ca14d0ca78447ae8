// tests/time/timeout_cost_test.cpp: what a timeout that does not fire costs, counted rather than
// timed: no heap allocation beyond the awaited task's own frame (none at all when frames come
// from the frame pool), no reactor operation, and no timer left armed. This file replaces the
// global operator new (counting per thread), so it is an executable of its own; not in the
// TSan build, whose runtime defines operator new itself (the release and ASan builds count).
#include <doctest/doctest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <stop_token>

#include <eddy/eddy.hpp>
#include <eddy/tasks/pool_config.hpp>

#include "support/tsan.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using namespace std::chrono_literals;

#ifndef EDDY_TEST_TSAN
namespace {
thread_local std::uint64_t allocations = 0;  // operator new calls on this thread
}  // namespace

void* operator new(std::size_t n) {
    ++allocations;
    if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#endif

namespace {

constexpr int kRounds = 1000;

/// Suspends once (so a timer around it is really armed, then disarmed), then returns v.
Task<int> yield_then(int v) {
    co_await eddy::yield_now();
    co_return v;
}

#ifndef EDDY_TEST_TSAN
/// Allocations on this worker thread for kRounds awaits of `make(i)`.
template <class Make>
Task<std::uint64_t> count_allocations(Make make) {
    int sum = 0;
    for (int i = 0; i < 10; ++i) sum += co_await make(i);  // warm up (caches, the timer queue)
    const std::uint64_t before = allocations;
    for (int i = 0; i < kRounds; ++i) sum += co_await make(i);
    const std::uint64_t after = allocations;
    CHECK(sum > 0);
    co_return after - before;
}
#endif

}  // namespace

#ifndef EDDY_TEST_TSAN
TEST_CASE("a with_timeout that does not fire allocates nothing beyond the task's frame") {
    Runtime rt(RuntimeConfig{.workers = 1});
    const std::uint64_t bare = rt.block_on(count_allocations([](int i) { return yield_then(i); }));
    const std::uint64_t timed =
        rt.block_on(count_allocations([](int i) { return eddy::with_timeout(yield_then(i), 1s); }));
    const std::uint64_t deadline = rt.block_on(count_allocations(
        [](int i) { return eddy::with_timeout(yield_then(i), std::chrono::steady_clock::now() + 1h); }));
#if EDDY_FRAME_POOL
    CHECK(bare == 0);  // the frames come from the frame pool (frame_pool.hpp), not operator new
#else
    CHECK(bare == kRounds);  // one frame per task
#endif
    CHECK(timed == bare);
    CHECK(deadline == bare);
}

/// Allocations on this worker thread for kRounds awaits of `make()`, which gives an awaitable
/// of no value that suspends once.
template <class Make>
Task<std::uint64_t> count_op_allocations(Make make) {
    for (int i = 0; i < 10; ++i) co_await make();  // warm up (caches, the timer queue)
    const std::uint64_t before = allocations;
    for (int i = 0; i < kRounds; ++i) co_await make();
    co_return allocations - before;
}

TEST_CASE("with_timeout or when_any with a sleep around an operation allocates nothing, not even a frame") {
    // Counted with frames from operator new too (the ASan build takes no frame pool), where
    // a wrapper task around the operation would show as one allocation per round.
    Runtime rt(RuntimeConfig{.workers = 1});
    CHECK(rt.block_on(count_op_allocations([] { return eddy::yield_now(); })) == 0);
    CHECK(rt.block_on(count_op_allocations([] { return eddy::with_timeout(eddy::yield_now(), 1s); })) == 0);
    CHECK(rt.block_on(count_op_allocations([] { return eddy::timeout_or(eddy::yield_now(), 1s); })) == 0);
    CHECK(rt.block_on(count_op_allocations([] { return eddy::when_any(eddy::yield_now(), eddy::sleep(1s)); })) == 0);
}
#endif

TEST_CASE("timeouts that do not fire and sleeps cancelled early need no reactor operation and leave no timer armed") {
    Runtime rt(RuntimeConfig{.workers = 2});
    const std::uint64_t operations_before = rt.metrics().reactor.operations;
    const std::uint64_t fired_before = rt.metrics().reactor.timers_fired;
    rt.block_on([]() -> Task<void> {
        for (int i = 0; i < kRounds; ++i) {
            CHECK(co_await eddy::with_timeout(yield_then(i), 10s) == i);
            std::stop_source stop;
            stop.request_stop();  // already stopped: the sleep ends at once
            CHECK_THROWS_AS(co_await eddy::sleep(1h, stop.get_token()), eddy::OperationCancelled);
        }
    }());
    // A sleep stopped while it waits (the stop comes from another task).
    rt.block_on([]() -> Task<void> {
        for (int i = 0; i < 100; ++i) {
            std::stop_source stop;
            eddy::JoinHandle<void> canceller = eddy::spawn([](std::stop_source& s) -> Task<void> {
                co_await eddy::yield_now();
                s.request_stop();
            }(stop));
            CHECK_THROWS_AS(co_await eddy::sleep(1h, stop.get_token()), eddy::OperationCancelled);
            co_await std::move(canceller);
        }
    }());
    const eddy::RuntimeMetrics m = rt.metrics();
    CHECK(m.reactor.operations == operations_before);
    CHECK(m.reactor.timers_fired == fired_before);
    CHECK(m.reactor.timers_armed == 0);
}
