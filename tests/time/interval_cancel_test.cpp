// tests/time/interval_cancel_test.cpp: eddy::Interval's ticks when something goes another way
// than planned: a cancelled tick (the schedule is kept), misuse (WrongThread off a worker, bad
// and huge periods, two tasks ticking one Interval), ticks taken in turn by tasks on two
// workers, and runtime shutdown while a tick waits.
//
// Wall-clock bounds are one-sided ("at least") or coarse (seconds), so a slow sanitizer build
// does not flake.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <limits>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <eddy/time/interval.hpp>
#include <eddy/time/sleep.hpp>
#include <eddy/time/with_timeout.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/sync/mutex.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/time.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/runtime/when_any.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/counted.hpp"
#include "support/io_helpers.hpp"
#include "support/waiting.hpp"
#include "support/interval.hpp"

using namespace eddy::test::interval;

namespace {

/// Awaits one tick; how it ended.
Task<eddy::test::Outcome> tick_outcome(Interval& iv, std::stop_token token, Clock::time_point* at) {
    try {
        *at = co_await iv.tick(std::move(token));
    } catch (const eddy::OperationCancelled&) {
        co_return eddy::test::Outcome::canceled;
    } catch (...) {
        co_return eddy::test::Outcome::other_exception;
    }
    co_return eddy::test::Outcome::value;
}

}  // namespace

TEST_SUITE("time/interval") {

namespace {

Task<void> stop_after(std::stop_source& stop, Clock::duration d) {
    co_await eddy::sleep(d);
    stop.request_stop();
}

Task<void> sleep_for(Clock::duration d) { co_await eddy::sleep(d); }

}  // namespace

TEST_CASE("a cancelled tick throws OperationCancelled and keeps the schedule") {
    Runtime rt(RuntimeConfig{.workers = 2});
    const auto start = Clock::now() + 300ms;
    const std::vector<Take> takes = rt.block_on([](Clock::time_point s) -> Task<std::vector<Take>> {
        Interval iv = eddy::interval_at(s, 20ms);
        // Its own token, stopped while it waits.
        std::stop_source stop;
        Clock::time_point at{};
        auto [outcome, done] = co_await eddy::when_all(tick_outcome(iv, stop.get_token(), &at), stop_after(stop, 10ms));
        (void)done;
        CHECK(outcome == eddy::test::Outcome::canceled);
        // The task's cancellation: when_any's sleep wins, the tick is cancelled.
        const auto raced = co_await eddy::when_any(tick_task(iv), sleep_for(10ms));
        CHECK(raced.index() == 1);
        // A token stopped before the await: throws at once, even for a tick that is due.
        Interval due = eddy::interval(1h);
        std::stop_source stopped;
        stopped.request_stop();
        CHECK(co_await tick_outcome(due, stopped.get_token(), &at) == eddy::test::Outcome::canceled);
        CHECK(co_await tick_outcome(iv, stopped.get_token(), &at) == eddy::test::Outcome::canceled);
        const auto first_due = Clock::now();
        CHECK(co_await due.tick() <= first_due);  // the first tick was not consumed
        // Nothing was taken off the schedule: the first tick is still `s`, then s + 20 ms.
        std::vector<Take> out;
        out.push_back(co_await take(iv));
        out.push_back(co_await take(iv));
        co_return out;
    }(start));
    REQUIRE(takes.size() == 2);
    CHECK(takes[0].at == start);
    CHECK(takes[0].after >= start);
    CHECK(takes[1].at == start + 20ms);
}

TEST_CASE("under a cancelled task a tick throws at once, even a due one, and takes nothing") {
    Runtime rt(RuntimeConfig{.workers = 1});
    const auto start = Clock::now() - 1h;  // due, and late
    Interval iv = eddy::interval_at(start, 1s);
    std::stop_source stop;
    stop.request_stop();
    Clock::time_point at{};
    CHECK(rt.block_on(eddy::with_stop_token(tick_outcome(iv, {}, &at), stop.get_token())) ==
          eddy::test::Outcome::canceled);
    CHECK(rt.block_on(tick_task(iv)) == start);  // the same first tick, then (burst) the next
    CHECK(rt.block_on(tick_task(iv)) == start + 1s);
}

TEST_CASE("ticks cancelled at random moments on two workers: each cancelled one is taken again, none lost") {
    // A task ticks a 1 ms Interval with a token that another task stops after a random
    // delay, 300 times. A tick that completed before the stop returns its time point; one
    // that was cancelled leaves it to the next tick: the time points taken are consecutive.
    Runtime rt(RuntimeConfig{.workers = 2});
    const auto [values, cancels] = rt.block_on([]() -> Task<std::pair<int, int>> {
        static constexpr auto p = 1ms;
        const auto start = Clock::now();
        Interval iv = eddy::interval_at(start, p);
        Clock::time_point expected = start;
        int taken = 0, cancelled = 0;
        for (int i = 0; i < 300; ++i) {
            std::stop_source stop;
            Clock::time_point at{};
            auto [outcome, done] = co_await eddy::when_all(
                tick_outcome(iv, stop.get_token(), &at), stop_after(stop, std::chrono::microseconds((i * 37) % 1500)));
            (void)done;
            if (outcome == eddy::test::Outcome::value) {
                CHECK(at == expected);
                expected += p;
                ++taken;
            } else {
                CHECK(outcome == eddy::test::Outcome::canceled);
                ++cancelled;
            }
        }
        CHECK(co_await iv.tick() == expected);
        co_return std::pair{taken, cancelled};
    }());
    CHECK(values + cancels == 300);
    MESSAGE(values << " ticks taken, " << cancels << " cancelled");
}

TEST_CASE("misuse: a period <= 0 throws std::invalid_argument") {
    CHECK_THROWS_AS((void)eddy::interval(0ms), std::invalid_argument);
    CHECK_THROWS_AS((void)eddy::interval(-1s), std::invalid_argument);
    CHECK_THROWS_AS((void)eddy::interval(std::chrono::hours::min()), std::invalid_argument);
    CHECK_THROWS_AS((void)eddy::interval(std::chrono::duration<double>(std::numeric_limits<double>::quiet_NaN())),
                    std::invalid_argument);
    CHECK_THROWS_AS((void)eddy::interval_at(Clock::now(), 0ns), std::invalid_argument);
    CHECK_THROWS_AS((void)eddy::interval_at(Clock::now(), -5ms), std::invalid_argument);
    CHECK_THROWS_AS((void)Interval(Clock::now(), Clock::duration::zero()), std::invalid_argument);
    // Rounded up, never to zero: a picosecond is a nanosecond.
    CHECK(eddy::interval(std::chrono::duration<long long, std::pico>(1)).period() == 1ns);
    CHECK(eddy::interval(std::chrono::duration<double, std::milli>(0.5)).period() == 500us);
}

TEST_CASE("huge periods saturate: the first tick comes, the second never does") {
    Runtime rt(RuntimeConfig{.workers = 1});
    rt.block_on([]() -> Task<void> {
        for (const bool as_double : {false, true}) {
            Interval iv = as_double ? eddy::interval(std::chrono::duration<double>(1e30))
                                    : eddy::interval(std::chrono::hours::max());
            CHECK(iv.period() == Clock::duration::max());
            (void)co_await iv.tick();
            CHECK(co_await no_tick_within(iv, 10ms));
        }
        // The schedule at the far ends of the clock: no overflow (UBSan), nothing early.
        Interval old = eddy::interval_at(Clock::time_point::min(), 1ms);
        old.set_missed_tick(MissedTick::skip);
        CHECK(co_await old.tick() == Clock::time_point::min());
        const auto now = Clock::now();
        const auto next = co_await old.tick();
        CHECK(next > now - 1ms);
        CHECK(next <= Clock::now());
        old.set_missed_tick(MissedTick::delay);
        Interval late = eddy::interval_at(Clock::time_point::min(), Clock::duration::max());
        CHECK(co_await late.tick() == Clock::time_point::min());
        (void)co_await late.tick();  // min + max: due, once
    }());
}

TEST_CASE("misuse: a tick that has to wait, off a worker thread, throws WrongThread and keeps the schedule") {
    Runtime rt(RuntimeConfig{.workers = 1});  // a runtime exists, but this thread is not its worker
    const auto start = Clock::now() + 100ms;
    Interval iv = eddy::interval_at(start, 1s);
    bool threw = false, other = false;
    [](Interval& i, bool& threw_, bool& other_) -> eddy::test::Eager {
        try {
            (void)co_await i.tick();
        } catch (const eddy::WrongThread&) {
            threw_ = true;
        } catch (...) {
            other_ = true;
        }
    }(iv, threw, other);
    CHECK(threw);
    CHECK_FALSE(other);
    // A tick already due completes anywhere, like a sleep.
    Interval due = eddy::interval(1h);
    const auto before = Clock::now();
    Clock::time_point at{};
    [](Interval& i, Clock::time_point& at_) -> eddy::test::Eager { at_ = co_await i.tick(); }(due, at);
    CHECK(at <= before);
    CHECK(at != Clock::time_point{});
    // Nothing was taken, and the Interval is not left claimed: on a worker, the first tick
    // is still `start`.
    CHECK(rt.block_on(tick_task(iv)) == start);
}

TEST_CASE("misuse: a second tick, reset or set_missed_tick while a tick is pending throws std::logic_error") {
    Runtime rt(RuntimeConfig{.workers = 2});
    rt.block_on([]() -> Task<void> {
        Interval iv = eddy::interval_at(Clock::now() + 1h, 1s);
        std::stop_source stop;
        Clock::time_point at{};
        eddy::JoinHandle<eddy::test::Outcome> waiting = eddy::spawn(tick_outcome(iv, stop.get_token(), &at));
        // Wait until the spawned tick holds the Interval (it claims it before it suspends).
        bool claimed = false;
        const auto deadline = Clock::now() + eddy::test::kDeadline;
        while (!claimed && !eddy::test::past(deadline)) {
            try {
                iv.set_missed_tick(MissedTick::burst);
                co_await eddy::sleep(1ms);
            } catch (const std::logic_error&) {
                claimed = true;
            }
        }
        REQUIRE(claimed);
        CHECK_THROWS_AS(iv.reset(), std::logic_error);
        CHECK_THROWS_AS(iv.set_missed_tick(MissedTick::skip), std::logic_error);
        CHECK_THROWS_AS((void)iv.tick(), std::logic_error);
        bool threw = false;
        try {
            (void)co_await iv.tick();
        } catch (const std::logic_error&) {
            threw = true;
        }
        CHECK(threw);
        stop.request_stop();
        CHECK(co_await std::move(waiting) == eddy::test::Outcome::canceled);
        // Released with the cancelled tick: usable again.
        iv.set_missed_tick(MissedTick::delay);
        CHECK(iv.missed_tick() == MissedTick::delay);
    }());
}

TEST_CASE("ticks taken in turn by tasks on two workers follow one schedule") {
    // Four tasks share an Interval through a Mutex; each tick is taken by whichever task holds
    // it, on either worker: together they see the schedule once, in order.
    static constexpr int kTasks = 4, kEach = 25;
    static constexpr auto p = 1ms;
    Runtime rt(RuntimeConfig{.workers = 2});
    const std::vector<Clock::time_point> seen = rt.block_on([]() -> Task<std::vector<Clock::time_point>> {
        const auto start = Clock::now();
        Interval iv = eddy::interval_at(start, p);
        eddy::Mutex m;
        std::vector<Clock::time_point> all;
        std::vector<Task<void>> tasks;
        for (int t = 0; t < kTasks; ++t)
            tasks.push_back([](Interval& i, eddy::Mutex& mu, std::vector<Clock::time_point>& out) -> Task<void> {
                for (int k = 0; k < kEach; ++k) {
                    auto guard = co_await mu.lock();
                    out.push_back(co_await i.tick());
                }
            }(iv, m, all));
        co_await eddy::when_all(std::move(tasks));
        CHECK(all.front() == start);
        co_return all;
    }());
    REQUIRE(seen.size() == static_cast<std::size_t>(kTasks * kEach));
    for (std::size_t k = 1; k < seen.size(); ++k) CHECK(seen[k] == seen[0] + k * p);  // burst: every one, in order
}

TEST_CASE("runtime shutdown while tasks wait on ticks destroys their frames") {
    eddy::test::LifetimeCounter counter;
    {
        Runtime rt(RuntimeConfig{.workers = 2});
        std::atomic<int> waiting{0};
        std::atomic<int> woke{0};
        for (int i = 0; i < 8; ++i)
            rt.spawn([](eddy::test::Counted, std::atomic<int>& w, std::atomic<int>& after) -> Task<void> {
                  Interval iv = eddy::interval(1h);
                  (void)co_await iv.tick();  // due at once
                  w.fetch_add(1);
                  (void)co_await iv.tick();  // an hour away
                  after.fetch_add(1);
              }(eddy::test::Counted(counter), waiting, woke))
                .detach();
        REQUIRE(eddy::test::wait_count(waiting, 8));
        rt.shutdown();
        CHECK(woke.load() == 0);
    }
    CHECK(counter.alive() == 0);  // every frame destroyed, its tick's timer unlinked (LeakSanitizer)
}

}  // TEST_SUITE("time/interval")
