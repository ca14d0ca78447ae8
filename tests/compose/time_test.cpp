// tests/compose/time_test.cpp: the timers (sleep, sleep_until, Interval::tick) under every
// combinator (tests/compose/compose.hpp). On the paused clock a 24 h sleep is a wait that
// only a cancellation ends, and a 1 h interval tick is taken in no real time.
#include <doctest/doctest.h>

#include <chrono>
#include <optional>

#include <eddy/eddy.hpp>

#include "compose/compose.hpp"

using eddy::Task;
using eddy::test::compose::check_all;
using namespace std::chrono_literals;

namespace {

using Clock = std::chrono::steady_clock;

// A sleep owns what it uses, so the spawning combinators take it too.
struct Sleep {
    auto completing() { return eddy::sleep(1ms); }
    void check(std::monostate) {}
    auto blocking() { return eddy::sleep(24h); }
};
TEST_CASE("time: sleep") { check_all<Sleep>(); }

struct SleepUntil {
    eddy::Runtime* rt = nullptr;  // its clock, also from the test thread (time::now() is real there)
    auto completing() { return eddy::sleep_until(rt->now() + 1ms); }
    void check(std::monostate) {}
    auto blocking() { return eddy::sleep_until(rt->now() + 24h); }
};
TEST_CASE("time: sleep_until") { check_all<SleepUntil>(); }

struct IntervalTick {
    eddy::Runtime* rt = nullptr;
    std::optional<eddy::Interval> every;
    Clock::time_point next;  // the tick the next tick() gives
    Task<void> arm() {       // a new schedule whose first tick is due now
        next = rt->now();
        every.emplace(next, 1h);
        co_return;
    }
    auto completing() { return every->tick(); }
    void check(Clock::time_point at) { COMPOSE_CHECK(at == next); }
    Task<void> hold() {
        next = rt->now() + 1h;
        every.emplace(next, 1h);
        co_return;
    }
    auto blocking() { return every->tick(); }
    Task<void> recheck() {
        // A cancelled tick took nothing off the schedule: the next one is the same time point.
        const Clock::time_point at = co_await every->tick();
        COMPOSE_CHECK(at == next);
        next += 1h;
    }
};
TEST_CASE("time: Interval::tick") { check_all<IntervalTick>(); }

}  // namespace
