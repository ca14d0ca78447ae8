// tests/runtime/when_all_test.cpp: eddy::when_all over a pack and over a vector: results,
// laziness, parallelism, the error policy, and misuse.
//
// Not tested here: awaiting when_all off a worker (when_all is itself a Task, so it is only
// ever awaited by a task that some runtime runs).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <eddy/time/sleep.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/this_worker.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/counted.hpp"
#include "support/sleeper.hpp"
#include "support/waiting.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::test::Counted;
using eddy::test::LifetimeCounter;
using eddy::test::rendezvous;
using eddy::test::kDeadline;
using eddy::test::past;
using namespace std::chrono_literals;

namespace {

Task<int> value(int v) { co_return v; }

Task<std::string> text(std::string s) { co_return s; }

Task<int&> ref_to(int& x) { co_return x; }

Task<std::unique_ptr<int>> boxed(int v) { co_return std::make_unique<int>(v); }

Task<void> count(std::atomic<int>& n) {
    n.fetch_add(1);
    co_return;
}

Task<void> set_flag(std::atomic<bool>& flag) {
    flag.store(true);
    co_return;
}

Task<int> hold(Counted c) { co_return c.value(); }

/// Yields `times` times, then returns `v`: a child that takes several scheduler turns.
Task<int> slow_value(int v, int times) {
    for (int i = 0; i < times; ++i) co_await eddy::yield_now();
    co_return v;
}

/// Counts itself in `finished` however it ends.
struct CountOnExit {
    std::atomic<int>& finished;
    ~CountOnExit() { finished.fetch_add(1); }
};

/// Sets `thrown` and throws at once.
Task<int> fail_now(std::atomic<bool>& thrown, std::atomic<int>& finished, std::string message) {
    CountOnExit exit{finished};
    thrown.store(true);
    throw std::runtime_error(message);
    co_return 0;
}

/// Yields until `thrown` is set (bounded), then a few more times, then returns `v`.
Task<int> finish_after_failure(std::atomic<bool>& thrown, std::atomic<int>& finished, int v) {
    CountOnExit exit{finished};
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (!thrown.load() && !past(deadline)) co_await eddy::yield_now();
    for (int i = 0; i < 10; ++i) co_await eddy::yield_now();
    co_return v;
}

/// Yields until `thrown` is set (bounded), then throws `message`.
Task<int> fail_after(std::atomic<bool>& thrown, std::atomic<int>& finished, std::string message) {
    CountOnExit exit{finished};
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (!thrown.load() && !past(deadline)) co_await eddy::yield_now();
    throw std::runtime_error(message);
}

// ---------------------------------------------------------------------------------------------
// Parents

Task<std::tuple<int, std::monostate, std::string>> mixed(std::atomic<bool>& ran) {
    co_return co_await eddy::when_all(value(1), set_flag(ran), text("three"));
}

Task<std::tuple<>> empty_pack() { co_return co_await eddy::when_all(); }

Task<int&> first_ref(int& x, int& y) {
    auto [rx, ry] = co_await eddy::when_all(ref_to(x), ref_to(y));
    (void)ry;
    co_return rx;
}

Task<std::vector<int>> squares(int n) {
    std::vector<Task<int>> tasks;
    for (int i = 0; i < n; ++i) tasks.push_back(slow_value(i * i, i % 3));
    co_return co_await eddy::when_all(std::move(tasks));
}

Task<void> count_all(std::atomic<int>& n, int children) {
    std::vector<Task<void>> tasks;
    for (int i = 0; i < children; ++i) tasks.push_back(count(n));
    co_await eddy::when_all(std::move(tasks));
}

Task<std::vector<std::unique_ptr<int>>> boxes() {
    std::vector<Task<std::unique_ptr<int>>> tasks;
    tasks.push_back(boxed(1));
    tasks.push_back(boxed(2));
    co_return co_await eddy::when_all(std::move(tasks));
}

Task<std::vector<std::optional<std::size_t>>> two_rendezvous(std::atomic<int>& started) {
    auto [a, b] = co_await eddy::when_all(rendezvous(started, 2), rendezvous(started, 2));
    co_return std::vector<std::optional<std::size_t>>{a, b};
}

Task<std::vector<std::optional<std::size_t>>> two_rendezvous_vector(std::atomic<int>& started) {
    std::vector<Task<std::optional<std::size_t>>> tasks;
    tasks.push_back(rendezvous(started, 2));
    tasks.push_back(rendezvous(started, 2));
    co_return co_await eddy::when_all(std::move(tasks));
}

/// One child fails at once, three finish later; returns the children finished when the
/// parent caught the error, or -1 if nothing was thrown.
Task<int> finished_when_caught(std::atomic<int>& finished) {
    std::atomic<bool> thrown{false};
    try {
        (void)co_await eddy::when_all(finish_after_failure(thrown, finished, 1), fail_now(thrown, finished, "first"),
                                      finish_after_failure(thrown, finished, 2),
                                      finish_after_failure(thrown, finished, 3));
    } catch (const std::runtime_error&) {
        co_return finished.load();
    }
    co_return -1;
}

Task<int> finished_when_caught_vector(std::atomic<int>& finished) {
    std::atomic<bool> thrown{false};
    std::vector<Task<int>> tasks;
    tasks.push_back(finish_after_failure(thrown, finished, 1));
    tasks.push_back(fail_now(thrown, finished, "first"));
    tasks.push_back(finish_after_failure(thrown, finished, 2));
    try {
        (void)co_await eddy::when_all(std::move(tasks));
    } catch (const std::runtime_error&) {
        co_return finished.load();
    }
    co_return -1;
}

/// Two children throw, one strictly after the other: the message of the exception rethrown.
Task<std::string> which_error(std::atomic<int>& finished) {
    std::atomic<bool> thrown{false};
    try {
        (void)co_await eddy::when_all(fail_after(thrown, finished, "second"), fail_now(thrown, finished, "first"));
    } catch (const std::runtime_error& e) {
        co_return e.what();
    }
    co_return "nothing thrown";
}

/// Awaits `rounds` when_alls of `children` children, counting every resumption after one.
Task<void> count_resumptions(std::atomic<int>& resumed, int rounds, int children) {
    for (int r = 0; r < rounds; ++r) {
        std::vector<Task<int>> tasks;
        for (int i = 0; i < children; ++i) tasks.push_back(value(i));
        std::vector<int> results = co_await eddy::when_all(std::move(tasks));
        resumed.fetch_add(1);
        if (results.size() != static_cast<std::size_t>(children)) throw std::logic_error("lost results");
    }
}

Task<bool> empty_child_in_pack(std::atomic<bool>& ran) {
    try {
        (void)co_await eddy::when_all(set_flag(ran), Task<int>{});
    } catch (const eddy::BrokenTask&) {
        co_return true;
    }
    co_return false;
}

Task<bool> empty_child_in_vector(std::atomic<int>& ran) {
    std::vector<Task<void>> tasks;
    tasks.push_back(count(ran));
    tasks.push_back(Task<void>{});
    tasks.push_back(count(ran));
    try {
        co_await eddy::when_all(std::move(tasks));
    } catch (const eddy::BrokenTask&) {
        co_return true;
    }
    co_return false;
}

Task<int> sum_of_pair(int a, int b) {
    auto [x, y] = co_await eddy::when_all(value(a), value(b));
    co_return x + y;
}

Task<int> nested() {
    auto [left, right] = co_await eddy::when_all(sum_of_pair(1, 2), sum_of_pair(3, 4));
    std::vector<Task<int>> more;
    for (int i = 0; i < 4; ++i) more.push_back(sum_of_pair(i, i));
    std::vector<int> sums = co_await eddy::when_all(std::move(more));
    int total = left + right;
    for (int s : sums) total += s;
    co_return total;
}

}  // namespace

TEST_SUITE("runtime/when_all") {

// ---------------------------------------------------------------------------------------------
// Results

TEST_CASE("when_all over a pack gives a tuple in argument order, with monostate for void") {
    static_assert(
        std::is_same_v<decltype(eddy::when_all(value(1), set_flag(std::declval<std::atomic<bool>&>())))::value_type,
                       std::tuple<int, std::monostate>>);
    std::atomic<bool> ran{false};
    Runtime rt(RuntimeConfig{.workers = 2});
    const auto [a, b, c] = rt.block_on(mixed(ran));
    CHECK(a == 1);
    CHECK(b == std::monostate{});
    CHECK(c == "three");
    CHECK(ran.load());
}

TEST_CASE("a Task<T&> child contributes a reference to the outside object") {
    int x = 1;
    int y = 2;
    Runtime rt(RuntimeConfig{.workers = 2});
    int& r = rt.block_on(first_ref(x, y));
    CHECK(&r == &x);
}

TEST_CASE("when_all over a vector gives the results in vector order") {
    Runtime rt(RuntimeConfig{.workers = 2});
    const std::vector<int> got = rt.block_on(squares(200));
    REQUIRE(got.size() == 200);
    for (int i = 0; i < 200; ++i) CHECK(got[static_cast<std::size_t>(i)] == i * i);
}

TEST_CASE("when_all over a vector of Task<void> runs every child") {
    static_assert(std::is_void_v<decltype(eddy::when_all(std::vector<Task<void>>{}))::value_type>);
    std::atomic<int> n{0};
    Runtime rt(RuntimeConfig{.workers = 2});
    rt.block_on(count_all(n, 500));
    CHECK(n.load() == 500);
}

TEST_CASE("when_all over a vector of move-only results moves them out") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto got = rt.block_on(boxes());
    REQUIRE(got.size() == 2);
    REQUIRE(got[0] != nullptr);
    REQUIRE(got[1] != nullptr);
    CHECK(*got[0] == 1);
    CHECK(*got[1] == 2);
}

TEST_CASE("when_all over an empty vector completes at once with no results") {
    Runtime rt(RuntimeConfig{.workers = 1});
    CHECK(rt.block_on(eddy::when_all(std::vector<Task<int>>{})).empty());
    rt.block_on(eddy::when_all(std::vector<Task<void>>{}));
}

TEST_CASE("when_all over an empty pack completes at once") {
    Runtime rt(RuntimeConfig{.workers = 1});
    CHECK(rt.block_on(empty_pack()) == std::tuple<>{});
}

TEST_CASE("nested when_alls give the combined result") {
    Runtime rt(RuntimeConfig{.workers = 2});
    CHECK(rt.block_on(nested()) == 3 + 7 + 0 + 2 + 4 + 6);
}

// ---------------------------------------------------------------------------------------------
// Laziness and lifetime

TEST_CASE("when_all starts nothing until it is awaited") {
    std::atomic<bool> ran{false};
    Task<std::tuple<std::monostate>> w = eddy::when_all(set_flag(ran));
    CHECK_FALSE(ran.load());
    Runtime rt(RuntimeConfig{.workers = 1});
    CHECK_FALSE(ran.load());
    rt.block_on(std::move(w));
    CHECK(ran.load());
}

TEST_CASE("destroying a when_all that was never awaited destroys its children") {
    LifetimeCounter counter;
    {
        Task<std::tuple<int, int>> w = eddy::when_all(hold(Counted(counter, 1)), hold(Counted(counter, 2)));
        std::vector<Task<int>> v;
        v.push_back(hold(Counted(counter, 3)));
        Task<std::vector<int>> wv = eddy::when_all(std::move(v));
        CHECK(counter.alive() == 3);
    }
    CHECK(counter.alive() == 0);
}

TEST_CASE("the children's frames are destroyed once when_all returned") {
    LifetimeCounter counter;
    Runtime rt(RuntimeConfig{.workers = 2});
    const auto [a, b] = rt.block_on(eddy::when_all(hold(Counted(counter, 1)), hold(Counted(counter, 2))));
    CHECK(a + b == 3);
    CHECK(counter.alive() == 0);
}

// ---------------------------------------------------------------------------------------------
// Parallelism

// Two children that each spin until both have started can only finish if they run at the
// same time on different workers; run one after the other, the first would hit its deadline.
TEST_CASE("the children of a pack when_all run in parallel on different workers") {
    std::atomic<int> started{0};
    Runtime rt(RuntimeConfig{.workers = 2});
    REQUIRE(rt.workers() == 2);
    const auto seen = rt.block_on(two_rendezvous(started));
    REQUIRE(seen[0].has_value());
    REQUIRE(seen[1].has_value());
    CHECK(*seen[0] != *seen[1]);
}

TEST_CASE("the children of a vector when_all run in parallel on different workers") {
    std::atomic<int> started{0};
    Runtime rt(RuntimeConfig{.workers = 2});
    REQUIRE(rt.workers() == 2);
    const auto seen = rt.block_on(two_rendezvous_vector(started));
    REQUIRE(seen.size() == 2);
    REQUIRE(seen[0].has_value());
    REQUIRE(seen[1].has_value());
    CHECK(*seen[0] != *seen[1]);
}

// ---------------------------------------------------------------------------------------------
// Errors

TEST_CASE("a child's exception is rethrown only after every child of a pack finished") {
    for (std::size_t workers : {1u, 2u}) {
        CAPTURE(workers);
        std::atomic<int> finished{0};
        Runtime rt(RuntimeConfig{.workers = workers});
        CHECK(rt.block_on(finished_when_caught(finished)) == 4);
    }
}

TEST_CASE("a child's exception is rethrown only after every child of a vector finished") {
    for (std::size_t workers : {1u, 2u}) {
        CAPTURE(workers);
        std::atomic<int> finished{0};
        Runtime rt(RuntimeConfig{.workers = workers});
        CHECK(rt.block_on(finished_when_caught_vector(finished)) == 3);
    }
}

// With one worker a child runs to its final suspend before anything else runs, so "first"
// is recorded strictly before "second" throws.
TEST_CASE("when several children throw, the first exception in time is rethrown") {
    std::atomic<int> finished{0};
    Runtime rt(RuntimeConfig{.workers = 1});
    CHECK(rt.block_on(which_error(finished)) == "first");
    CHECK(finished.load() == 2);
}

TEST_CASE("the awaiter of when_all resumes exactly once per when_all") {
    std::atomic<int> resumed{0};
    Runtime rt(RuntimeConfig{.workers = 2});
    rt.block_on(count_resumptions(resumed, 200, 16));
    CHECK(resumed.load() == 200);
}

TEST_CASE("an empty child in a pack throws BrokenTask before any child starts") {
    std::atomic<bool> ran{false};
    Runtime rt(RuntimeConfig{.workers = 2});
    CHECK(rt.block_on(empty_child_in_pack(ran)));
    CHECK_FALSE(ran.load());
}

TEST_CASE("an empty child in a vector throws BrokenTask before any child starts") {
    std::atomic<int> ran{0};
    Runtime rt(RuntimeConfig{.workers = 2});
    CHECK(rt.block_on(empty_child_in_vector(ran)));
    CHECK(ran.load() == 0);
}

}  // TEST_SUITE("runtime/when_all")

namespace {

/// Sleeps (practically) forever; counts its cancellation.
Task<int> sleeper(std::atomic<int>& cancelled) {
    try {
        co_await eddy::sleep(std::chrono::hours(1));
    } catch (const eddy::OperationCancelled&) {
        cancelled.fetch_add(1);
        throw;
    }
    co_return 0;
}

Task<int> fail_soon() {
    co_await eddy::sleep(5ms);
    throw std::runtime_error("first failure");
}

}  // namespace

TEST_CASE("a failing child cancels its waiting siblings instead of waiting for them") {
    Runtime rt(RuntimeConfig{.workers = 2});
    std::atomic<int> cancelled{0};
    const auto start = std::chrono::steady_clock::now();
    auto h = rt.spawn(eddy::when_all(sleeper(cancelled), fail_soon(), sleeper(cancelled)));
    const auto deadline = start + kDeadline;
    while (!h.is_finished() && !past(deadline)) std::this_thread::yield();
    REQUIRE(h.is_finished());
    CHECK_THROWS_WITH_AS(rt.block_on([](eddy::JoinHandle<std::tuple<int, int, int>> j) -> Task<void> {
        (void)co_await std::move(j);
    }(std::move(h))),
                         "first failure", std::runtime_error);
    CHECK(cancelled.load() == 2);
    CHECK(std::chrono::steady_clock::now() - start < 10s);  // not the hour of the sleeps
}

TEST_CASE("a failing child of a vector when_all cancels the others; the first error wins") {
    Runtime rt(RuntimeConfig{.workers = 2});
    std::atomic<int> cancelled{0};
    std::vector<Task<int>> tasks;
    for (int i = 0; i < 8; ++i) tasks.push_back(sleeper(cancelled));
    tasks.push_back(fail_soon());
    CHECK_THROWS_WITH_AS(rt.block_on(eddy::when_all(std::move(tasks))), "first failure", std::runtime_error);
    CHECK(cancelled.load() == 8);
}

TEST_CASE("cancelling the awaiter of when_all cancels every child") {
    Runtime rt(RuntimeConfig{.workers = 2});
    std::atomic<int> cancelled{0};
    std::stop_source stop;
    CHECK_THROWS_AS(rt.block_on(eddy::when_all(
                        eddy::with_stop_token(eddy::when_all(sleeper(cancelled), sleeper(cancelled)), stop.get_token()),
                        eddy::test::stop_after(5ms, stop))),
                    eddy::OperationCancelled);
    CHECK(cancelled.load() == 2);
}
