// tests/runtime/when_any_test.cpp: eddy::when_any over a pack and over a vector: the winner,
// the cancellation of the losers (they have stopped, frames gone, when when_any returns), the
// error policy, cancellation from above, and misuse.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <eddy/time/sleep.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/runtime/when_any.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/counted.hpp"
#include "support/net_helpers.hpp"
#include "support/sleeper.hpp"

using eddy::OperationCancelled;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::test::Counted;
using eddy::test::LifetimeCounter;
using eddy::test::run;
using eddy::test::sleeper;
using namespace std::chrono_literals;

namespace {

Task<int> value(int v) { co_return v; }

Task<int> after(std::chrono::milliseconds d, int v) {
    co_await eddy::sleep(d);
    co_return v;
}

Task<int> fail_after(std::chrono::milliseconds d) {
    co_await eddy::sleep(d);
    throw std::runtime_error("child failed");
}

Task<std::string> text_after(std::chrono::milliseconds d, std::string s) {
    co_await eddy::sleep(d);
    co_return s;
}

}  // namespace

TEST_CASE("the first child to finish wins: its index and value, even among equal types") {
    Runtime rt(RuntimeConfig{.workers = 2});
    LifetimeCounter frames;
    std::atomic<int> cancelled{0};
    auto r = run(rt, [&]() -> Task<std::variant<int, int, int>> {
        co_return co_await eddy::when_any(sleeper(frames, cancelled), value(7), sleeper(frames, cancelled));
    }());
    CHECK(r.index() == 1);
    CHECK(std::get<1>(r) == 7);
}

TEST_CASE("the losers are cancelled and have stopped, frames destroyed, when when_any returns") {
    Runtime rt(RuntimeConfig{.workers = 2});
    LifetimeCounter frames;
    std::atomic<int> cancelled{0};
    const int alive_after = run(rt, [&]() -> Task<int> {
        auto r = co_await eddy::when_any(sleeper(frames, cancelled), after(5ms, 1), sleeper(frames, cancelled));
        CHECK(r.index() == 1);
        co_return frames.alive();
    }());
    CHECK(alive_after == 0);
    CHECK(frames.constructions() == 2);
    CHECK(cancelled.load() == 2);
}

TEST_CASE("different value types come back as the matching alternative") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto r = run(rt, eddy::when_any(after(1h, 1), text_after(1ms, "fast")));
    REQUIRE(r.index() == 1);
    CHECK(std::get<1>(r) == "fast");
}

TEST_CASE("a Task<void> winner gives std::monostate and a Task<T&> winner a reference") {
    Runtime rt(RuntimeConfig{.workers = 1});
    int x = 5;
    auto r = run(rt, eddy::when_any([]() -> Task<void> { co_await eddy::sleep(1h); }(),
                                    [](int& v) -> Task<int&> { co_return v; }(x)));
    REQUIRE(r.index() == 1);
    CHECK(&std::get<1>(r).get() == &x);

    auto v = run(rt, eddy::when_any([]() -> Task<void> { co_return; }(), after(1h, 1)));
    CHECK(v.index() == 0);
}

TEST_CASE("a winner that throws has its exception rethrown after the others stopped") {
    Runtime rt(RuntimeConfig{.workers = 2});
    LifetimeCounter frames;
    std::atomic<int> cancelled{0};
    CHECK_THROWS_WITH_AS(run(rt, eddy::when_any(sleeper(frames, cancelled), fail_after(5ms))), "child failed",
                         std::runtime_error);
    CHECK(cancelled.load() == 1);
    CHECK(frames.alive() == 0);
}

TEST_CASE("when_any over a vector gives the winner's position and value") {
    Runtime rt(RuntimeConfig{.workers = 2});
    std::vector<Task<int>> tasks;
    tasks.push_back(after(1h, 0));
    tasks.push_back(after(1h, 1));
    tasks.push_back(after(2ms, 42));
    tasks.push_back(after(1h, 3));
    auto w = run(rt, eddy::when_any(std::move(tasks)));
    CHECK(w.index == 2);
    CHECK(w.value == 42);
}

TEST_CASE("when_any over a vector of Task<void> gives the winner's position") {
    Runtime rt(RuntimeConfig{.workers = 2});
    std::vector<Task<void>> tasks;
    tasks.push_back([]() -> Task<void> { co_await eddy::sleep(1h); }());
    tasks.push_back([]() -> Task<void> { co_await eddy::sleep(1ms); }());
    CHECK(run(rt, eddy::when_any(std::move(tasks))) == 1);
}

TEST_CASE("cancelling the awaiter of when_any cancels every child") {
    Runtime rt(RuntimeConfig{.workers = 2});
    LifetimeCounter frames;
    std::atomic<int> cancelled{0};
    std::stop_source stop;
    auto outer = [&]() -> Task<void> {
        co_await eddy::with_stop_token(eddy::when_any(sleeper(frames, cancelled), sleeper(frames, cancelled)),
                                       stop.get_token());
    };
    CHECK_THROWS_AS(run(rt, eddy::when_all(outer(), eddy::test::stop_after(10ms, stop))), OperationCancelled);
    CHECK(cancelled.load() == 2);
    CHECK(frames.alive() == 0);
}

TEST_CASE("an empty vector throws std::invalid_argument and an empty child BrokenTask") {
    Runtime rt(RuntimeConfig{.workers = 1});
    CHECK_THROWS_AS(run(rt, eddy::when_any(std::vector<Task<int>>{})), std::invalid_argument);
    Task<int> empty;
    CHECK_THROWS_AS(run(rt, eddy::when_any(value(1), std::move(empty))), eddy::BrokenTask);
    std::vector<Task<int>> tasks;
    tasks.push_back(value(1));
    tasks.emplace_back();
    CHECK_THROWS_AS(run(rt, eddy::when_any(std::move(tasks))), eddy::BrokenTask);
}

TEST_CASE("when_any of tasks that finish at once picks exactly one winner, repeatedly") {
    Runtime rt(RuntimeConfig{.workers = 2});
    for (int i = 0; i < 2000; ++i) {
        std::vector<Task<int>> tasks;
        for (int k = 0; k < 4; ++k) tasks.push_back(value(k));
        auto w = run(rt, eddy::when_any(std::move(tasks)));
        REQUIRE(w.index < 4);
        REQUIRE(w.value == static_cast<int>(w.index));
    }
}
