// tests/runtime/runtime_test.cpp: Runtime itself: block_on, workers(), where code runs
// (this_worker), what may not be called from a worker, and the issue example end to end.
#include <doctest/doctest.h>

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/this_worker.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;

namespace {

Task<int> value(int v) { co_return v; }

Task<void> set_flag(bool& flag) {
    flag = true;
    co_return;
}

Task<int&> ref_to(int& x) { co_return x; }

Task<int> fail(std::string message) {
    throw std::runtime_error(message);
    co_return 0;
}

/// Calls `rt.block_on` from inside a task that `rt` runs; true if it threw WrongThread.
Task<bool> block_on_from_worker(Runtime& rt) {
    try {
        (void)rt.block_on(value(1));
    } catch (const eddy::WrongThread&) {
        co_return true;
    }
    co_return false;
}

Task<bool> shutdown_from_worker(Runtime& rt) {
    try {
        rt.shutdown();
    } catch (const eddy::WrongThread&) {
        co_return true;
    }
    co_return false;
}

Task<std::optional<std::size_t>> worker_index() { co_return eddy::this_worker::index(); }

/// Records this_worker::index() before and after a few suspension points.
Task<std::vector<std::optional<std::size_t>>> worker_indices_across_awaits() {
    std::vector<std::optional<std::size_t>> seen;
    seen.push_back(eddy::this_worker::index());
    co_await eddy::yield_now();
    seen.push_back(eddy::this_worker::index());
    seen.push_back(co_await eddy::spawn(worker_index()));
    auto [a, b] = co_await eddy::when_all(worker_index(), worker_index());
    seen.push_back(a);
    seen.push_back(b);
    seen.push_back(eddy::this_worker::index());
    co_return seen;
}

// The logic of examples/issue_program.cpp, which must give 1053 on any worker count.
Task<int> add(int a, int b) { co_return a + b; }
Task<int> twice(int x) { co_return co_await add(x, x); }
Task<void> issue_fail() {
    throw std::runtime_error("boom");
    co_return;
}
Task<int> issue_main_task() {
    auto [a, b] = co_await eddy::when_all(twice(1), twice(20));
    std::vector<Task<int>> many;
    for (int i = 0; i < 1000; ++i) many.push_back(twice(i));
    std::vector<int> all = co_await eddy::when_all(std::move(many));
    eddy::JoinHandle<int> h = eddy::spawn(twice(5));
    co_await eddy::yield_now();
    int c = co_await std::move(h);
    try {
        co_await issue_fail();
    } catch (const std::runtime_error&) {
        c += 1;
    }
    co_return a + b + c + static_cast<int>(all.size());
}

}  // namespace

TEST_SUITE("runtime/runtime") {

TEST_CASE("block_on returns the task's value") {
    Runtime rt(RuntimeConfig{.workers = 2});
    CHECK(rt.block_on(value(42)) == 42);
}

TEST_CASE("block_on rethrows the task's exception") {
    Runtime rt(RuntimeConfig{.workers = 2});
    CHECK_THROWS_WITH_AS(rt.block_on(fail("boom")), "boom", std::runtime_error);
}

TEST_CASE("block_on runs a Task<void> to completion") {
    Runtime rt(RuntimeConfig{.workers = 2});
    bool ran = false;
    rt.block_on(set_flag(ran));
    CHECK(ran);
}

TEST_CASE("block_on of a Task<T&> returns a reference to the outside object") {
    Runtime rt(RuntimeConfig{.workers = 2});
    int outside = 1;
    int& r = rt.block_on(ref_to(outside));
    CHECK(&r == &outside);
}

TEST_CASE("block_on can be called many times on one runtime") {
    Runtime rt(RuntimeConfig{.workers = 2});
    int sum = 0;
    for (int i = 0; i < 100; ++i) sum += rt.block_on(value(i));
    CHECK(sum == 4950);
}

TEST_CASE("block_on of an empty task throws BrokenTask") {
    Runtime rt(RuntimeConfig{.workers = 1});
    CHECK_THROWS_AS(rt.block_on(Task<int>{}), eddy::BrokenTask);
}

TEST_CASE("workers() is the configured worker count") {
    for (std::size_t n : {1u, 2u, 3u}) {
        CAPTURE(n);
        Runtime rt(RuntimeConfig{.workers = n});
        CHECK(rt.workers() == n);
    }
}

TEST_CASE("block_on from one of the runtime's own workers throws WrongThread") {
    Runtime rt(RuntimeConfig{.workers = 2});
    CHECK(rt.block_on(block_on_from_worker(rt)));
}

TEST_CASE("block_on from a worker of another runtime throws WrongThread") {
    Runtime outer(RuntimeConfig{.workers = 1});
    Runtime inner(RuntimeConfig{.workers = 1});
    CHECK(outer.block_on(block_on_from_worker(inner)));
    CHECK(inner.block_on(value(3)) == 3);  // the inner runtime is unharmed
}

TEST_CASE("shutdown from one of the runtime's own workers throws WrongThread") {
    Runtime rt(RuntimeConfig{.workers = 2});
    CHECK(rt.block_on(shutdown_from_worker(rt)));
    CHECK(rt.block_on(value(5)) == 5);  // and the runtime keeps running
}

TEST_CASE("this_worker::index is nullopt off a worker thread") {
    CHECK_FALSE(eddy::this_worker::index().has_value());
    Runtime rt(RuntimeConfig{.workers = 2});
    CHECK_FALSE(eddy::this_worker::index().has_value());
}

TEST_CASE("this_worker::index is below workers() inside tasks, across suspension points") {
    for (std::size_t n : {1u, 2u, 4u}) {
        CAPTURE(n);
        Runtime rt(RuntimeConfig{.workers = n});
        const auto seen = rt.block_on(worker_indices_across_awaits());
        REQUIRE(seen.size() == 6);
        for (const auto& index : seen) {
            REQUIRE(index.has_value());
            CHECK(*index < n);
        }
    }
}

TEST_CASE("the issue example program gives 1053 with 1, 2 and 4 workers") {
    for (std::size_t n : {1u, 2u, 4u}) {
        CAPTURE(n);
        Runtime rt(RuntimeConfig{.workers = n});
        CHECK(rt.block_on(issue_main_task()) == 1053);
    }
}

}  // TEST_SUITE("runtime/runtime")
