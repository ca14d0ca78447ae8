// tests/runtime/when_any_all_results_test.cpp: eddy::when_any_all_results, the race that drops
// no finished result: the winner, a loser that returned before its cancellation took effect
// (kept), losers that were cancelled (empty), the error policy, misuse, and racing pipe reads
// where every byte written is either returned or still in its pipe.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include <eddy/eddy.hpp>
#include <eddy/runtime/when_any_all_results.hpp>

#include "support/counted.hpp"
#include "support/net_helpers.hpp"
#include "support/sleeper.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
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

/// Waits for `go`, then returns v: a grant that came before the cancel wins.
Task<int> when_set(eddy::Event& go, int v) {
    co_await go;
    co_return v;
}

/// Sets `go` (granting the waiter), then returns v at once: it finishes first.
Task<int> set_then(eddy::Event& go, int v) {
    go.set();
    co_return v;
}

Task<std::string> read_some(int fd) {
    std::array<std::byte, 64> buf{};
    const std::size_t n = co_await eddy::io::read(fd, buf);
    co_return eddy::test::text(std::span(buf).first(n));
}

Task<void> write_both(int a, int b) {
    co_await eddy::yield_now();  // usually after both readers wait; either order must keep every byte
    (void)co_await eddy::io::write(a, eddy::test::bytes("A"));
    (void)co_await eddy::io::write(b, eddy::test::bytes("B"));
}

}  // namespace

TEST_CASE("the winner's value and index; a loser that was cancelled has an empty slot") {
    Runtime rt(RuntimeConfig{.workers = 2});
    LifetimeCounter frames;
    std::atomic<int> cancelled{0};
    auto r = run(rt, eddy::when_any_all_results(after(1h, 1), value(7), sleeper(frames, cancelled)));
    CHECK(r.winner == 1);
    CHECK_FALSE(std::get<0>(r.values).has_value());
    REQUIRE(std::get<1>(r.values).has_value());
    CHECK(*std::get<1>(r.values) == 7);
    CHECK_FALSE(std::get<2>(r.values).has_value());  // Task<void>: std::optional<std::monostate>
    CHECK(cancelled.load() == 1);
    CHECK(frames.alive() == 0);
}

TEST_CASE("a loser that returned before its cancellation took effect keeps its value") {
    // On one worker: child 0 waits on the event first; child 1 sets it (the grant is made
    // before any cancel) and finishes first. Child 0 then resumes granted and returns: when_any
    // would drop its 10, when_any_all_results hands it back.
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::Event go;
    auto r = run(rt, eddy::when_any_all_results(when_set(go, 10), set_then(go, 20)));
    CHECK(r.winner == 1);
    REQUIRE(std::get<0>(r.values).has_value());
    CHECK(*std::get<0>(r.values) == 10);
    REQUIRE(std::get<1>(r.values).has_value());
    CHECK(*std::get<1>(r.values) == 20);
}

TEST_CASE("the vector form gives a slot per task") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::Event go;
    std::vector<Task<int>> tasks;
    tasks.push_back(when_set(go, 1));
    tasks.push_back(after(1h, 2));
    tasks.push_back(set_then(go, 3));
    auto r = run(rt, eddy::when_any_all_results(std::move(tasks)));
    CHECK(r.winner == 2);
    REQUIRE(r.values.size() == 3);
    CHECK(r.values[0] == std::optional<int>(1));
    CHECK_FALSE(r.values[1].has_value());
    CHECK(r.values[2] == std::optional<int>(3));

    std::vector<Task<void>> voids;
    voids.push_back([]() -> Task<void> { co_await eddy::sleep(1h); }());
    voids.push_back([]() -> Task<void> { co_return; }());
    auto v = run(rt, eddy::when_any_all_results(std::move(voids)));
    CHECK(v.winner == 1);
    CHECK_FALSE(v.values[0].has_value());
    CHECK(v.values[1].has_value());
}

TEST_CASE("a reference result comes back as a reference_wrapper") {
    Runtime rt(RuntimeConfig{.workers = 1});
    int target = 5;
    auto r = run(rt, eddy::when_any_all_results([](int& t) -> Task<int&> { co_return t; }(target), after(1h, 0)));
    CHECK(r.winner == 0);
    REQUIRE(std::get<0>(r.values).has_value());
    CHECK(&std::get<0>(r.values)->get() == &target);
}

TEST_CASE("a winner that throws is rethrown after the others stopped") {
    Runtime rt(RuntimeConfig{.workers = 2});
    LifetimeCounter frames;
    std::atomic<int> cancelled{0};
    auto failing = []() -> Task<int> {
        co_await eddy::sleep(2ms);
        throw std::runtime_error("child failed");
    };
    CHECK_THROWS_WITH_AS(run(rt, eddy::when_any_all_results(sleeper(frames, cancelled), failing())), "child failed",
                         std::runtime_error);
    CHECK(cancelled.load() == 1);
    CHECK(frames.alive() == 0);
}

TEST_CASE("misuse: an empty vector, an empty child") {
    Runtime rt(RuntimeConfig{.workers = 1});
    CHECK_THROWS_AS(run(rt, eddy::when_any_all_results(std::vector<Task<int>>{})), std::invalid_argument);
    Task<int> empty;
    CHECK_THROWS_AS(run(rt, eddy::when_any_all_results(value(1), std::move(empty))), eddy::BrokenTask);
    std::vector<Task<int>> tasks;
    tasks.push_back(value(1));
    tasks.emplace_back();
    CHECK_THROWS_AS(run(rt, eddy::when_any_all_results(std::move(tasks))), eddy::BrokenTask);
}

TEST_CASE("racing pipe reads lose no byte: each is returned or still in its pipe") {
    Runtime rt(RuntimeConfig{.workers = 2});
    int both_returned = 0;
    for (int round = 0; round < 200; ++round) {
        auto a = eddy::io::pipe();
        auto b = eddy::io::pipe();
        const int ra = a.read_end.get();
        const int rb = b.read_end.get();
        auto race = eddy::when_any_all_results(read_some(ra), read_some(rb));
        auto [r, ignored] = run(rt, eddy::when_all(std::move(race), write_both(a.write_end.get(), b.write_end.get())));
        (void)ignored;
        a.write_end = {};
        b.write_end = {};  // closed: a read of an emptied pipe gives 0 instead of waiting
        const std::string left_a = run(rt, read_some(ra));
        const std::string left_b = run(rt, read_some(rb));
        const std::string got_a = std::get<0>(r.values).value_or("");
        const std::string got_b = std::get<1>(r.values).value_or("");
        CHECK(got_a + left_a == "A");
        CHECK(got_b + left_b == "B");
        CHECK((r.winner == 0 ? got_a : got_b).size() == 1);  // the winner read its byte
        if (!got_a.empty() && !got_b.empty()) ++both_returned;
    }
    MESSAGE("rounds where the loser's read had completed and was kept: " << both_returned << " of 200");
}
