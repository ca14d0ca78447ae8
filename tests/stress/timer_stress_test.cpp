// tests/stress/timer_stress_test.cpp: timers under load: with_timeout and sleep by the
// ten thousand, stopped at random from tasks and from a plain thread while their deadlines
// come due, on 1, 2 and 4 workers (EDDY_STRESS_WORKERS overrides), a fresh Runtime per round.
//
// What the per-worker timer queues (io/time/timer_queue.hpp, io/time/timer_wheel.hpp) must keep:
//  - never early: a sleep that completes, and a with_timeout that throws TimedOut, do so no
//    sooner than their deadline;
//  - every outcome accounted for: each with_timeout gives its task's value, TimedOut or
//    OperationCancelled (and OperationCancelled only where its stop was requested); each
//    sleep completes or is cancelled, and resumes exactly once;
//  - nothing left behind: timers_armed is back to 0, every frame is destroyed (a Counted per
//    frame), and no sleep or disarm needed the reactor for an operation (reactor.operations
//    does not move: disarming is an unlink on the worker's queue);
//  - the Runtime destroyed with 10,000 timeouts armed for an hour ends at once, leaking
//    nothing (LeakSanitizer in the ASan build);
//  - eddy::Interval (1,000 at once, each tick under a stop requested at a random moment):
//    no tick early, every time point one its MissedTick policy allows after the previous
//    one, and a cancelled tick takes nothing off the schedule (burst: no time point missed).
// A Watchdog per round names the round that hangs.
#include <eddy/eddy.hpp>

#include "support/counted.hpp"
#include "support/stress_rounds.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <random>
#include <stop_token>
#include <thread>
#include <vector>

using eddy::JoinHandle;
using eddy::Task;
using eddy::test::Counted;
using eddy::test::LifetimeCounter;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

#ifdef EDDY_TEST_TSAN
constexpr int kRounds = 2;
#else
constexpr int kRounds = 4;
#endif
constexpr int kCount = 10'000;
constexpr std::size_t kWorkerCounts[] = {1, 2, 4};

template <class Body>
void for_each_configuration(Body body) {
    eddy::test::for_each_stress_configuration("timer_stress", kWorkerCounts, kRounds, body);
}

std::uint64_t seed() {
    static const std::uint64_t s = [] {
        const char* v = std::getenv("EDDY_STRESS_SEED");
        return v != nullptr ? std::strtoull(v, nullptr, 10) : std::uint64_t{20261124};
    }();
    return s;
}

/// How one item is stopped, if at all.
enum class Stopper : std::uint8_t { kNone, kTask, kThread };

struct Plan {
    std::chrono::microseconds work;     // how long the task under the timeout sleeps (0: it yields once)
    std::chrono::microseconds timeout;  // with_timeout's limit, or the sleep's duration
    std::chrono::microseconds stop_at;  // when its stop is requested (kTask, kThread)
    Stopper stopper;
};

std::vector<Plan> make_plans(std::uint64_t round_seed) {
    std::mt19937_64 rng(round_seed);
    std::vector<Plan> plans(kCount);
    for (Plan& p : plans) {
        p.work = std::chrono::microseconds(rng() % 4 == 0 ? 0 : rng() % 8000);
        p.timeout = std::chrono::microseconds(rng() % 8000);
        p.stop_at = std::chrono::microseconds(rng() % 8000);
        p.stopper = static_cast<Stopper>(rng() % 3);
    }
    return plans;
}

/// Per-item results, written by the item's task and read after the round has joined.
struct Outcomes {
    std::atomic<int> values{0};
    std::atomic<int> timed_out{0};
    std::atomic<int> cancelled{0};
    std::atomic<int> early{0};              // a completion or TimedOut before its deadline
    std::atomic<int> cancelled_unasked{0};  // OperationCancelled without a stop request
    std::atomic<int> wrong_value{0};
    std::atomic<int> other_errors{0};
};

Task<int> work(LifetimeCounter& frames, std::chrono::microseconds d, int value) {
    Counted frame(frames);
    if (d.count() == 0) {
        co_await eddy::yield_now();
    } else {
        co_await eddy::sleep(d);
    }
    co_return value;
}

/// One with_timeout, awaited directly (the path that allocates nothing beyond the task).
Task<void> timed(LifetimeCounter& frames, const Plan& plan, int i, const std::stop_source& stop, Outcomes& out) {
    Counted frame(frames);
    const auto start = Clock::now();
    try {
        const int v = co_await eddy::with_timeout(work(frames, plan.work, i), plan.timeout);
        if (v != i) out.wrong_value.fetch_add(1);
        if (Clock::now() - start < plan.work) out.early.fetch_add(1);
        out.values.fetch_add(1);
    } catch (const eddy::TimedOut&) {
        if (Clock::now() - start < plan.timeout) out.early.fetch_add(1);
        out.timed_out.fetch_add(1);
    } catch (const eddy::OperationCancelled&) {
        if (!stop.stop_requested()) out.cancelled_unasked.fetch_add(1);
        out.cancelled.fetch_add(1);
    } catch (...) {
        out.other_errors.fetch_add(1);
    }
}

/// One sleep of plan.timeout.
Task<void> slept(LifetimeCounter& frames, const Plan& plan, const std::stop_source& stop, Outcomes& out) {
    Counted frame(frames);
    const auto start = Clock::now();
    try {
        co_await eddy::sleep(plan.timeout);
        if (Clock::now() - start < plan.timeout) out.early.fetch_add(1);
        out.values.fetch_add(1);
    } catch (const eddy::OperationCancelled&) {
        if (!stop.stop_requested()) out.cancelled_unasked.fetch_add(1);
        out.cancelled.fetch_add(1);
    } catch (...) {
        out.other_errors.fetch_add(1);
    }
}

Task<void> stop_later(std::chrono::microseconds d, std::stop_source& stop) {
    co_await eddy::sleep(d);
    stop.request_stop();
}

enum class Kind { kTimeout, kSleep };

/// Spawns kCount items of `kind`, each under its own stop source, and stops a third of them
/// from tasks and a third from a plain thread at the planned times; joins them all.
Task<void> run_round(Kind kind, LifetimeCounter& frames, const std::vector<Plan>& plans,
                     std::vector<std::stop_source>& stops, Outcomes& out, std::atomic<bool>& spawned) {
    std::vector<JoinHandle<void>> handles;
    handles.reserve(2 * kCount);
    for (int i = 0; i < kCount; ++i) {
        const Plan& p = plans[static_cast<std::size_t>(i)];
        Task<void> item = kind == Kind::kTimeout ? timed(frames, p, i, stops[static_cast<std::size_t>(i)], out)
                                                 : slept(frames, p, stops[static_cast<std::size_t>(i)], out);
        handles.push_back(
            eddy::spawn(eddy::with_stop_token(std::move(item), stops[static_cast<std::size_t>(i)].get_token())));
        if (p.stopper == Stopper::kTask)
            handles.push_back(eddy::spawn(stop_later(p.stop_at, stops[static_cast<std::size_t>(i)])));
    }
    spawned.store(true);
    for (JoinHandle<void>& h : handles) co_await std::move(h);
}

/// The plain thread's part: requests the kThread stops at about their planned times.
void stop_from_thread(const std::vector<Plan>& plans, std::vector<std::stop_source>& stops,
                      const std::atomic<bool>& spawned) {
    while (!spawned.load()) std::this_thread::yield();
    const auto start = Clock::now();
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < plans.size(); ++i) {
        if (plans[i].stopper == Stopper::kThread) order.push_back(i);
    }
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return plans[a].stop_at < plans[b].stop_at; });
    for (std::size_t i : order) {
        const auto when = start + plans[i].stop_at;
        while (Clock::now() < when) std::this_thread::yield();
        stops[i].request_stop();
    }
}

/// How often each outcome occurred, over all rounds of a test case.
struct Tally {
    int values = 0;
    int timed_out = 0;
    int cancelled = 0;
};

void check_round(Kind kind, std::size_t workers, int round, Tally& tally) {
    LifetimeCounter frames;
    Outcomes out;
    const std::vector<Plan> plans =
        make_plans(seed() * 1000 + workers * 10 + static_cast<std::uint64_t>(round) + (kind == Kind::kSleep ? 500 : 0));
    std::vector<std::stop_source> stops(kCount);
    std::atomic<bool> spawned{false};
    {
        eddy::RuntimeConfig config;
        config.workers = workers;
        eddy::Runtime rt(config);
        const std::uint64_t operations_before = rt.metrics().reactor.operations;
        std::thread stopper([&] { stop_from_thread(plans, stops, spawned); });
        rt.block_on(run_round(kind, frames, plans, stops, out, spawned));
        stopper.join();
        const eddy::RuntimeMetrics m = rt.metrics();
        CHECK(m.reactor.timers_armed == 0);
        CHECK(m.reactor.operations == operations_before);  // timers never needed an operation
    }
    CAPTURE(seed());
    CHECK(out.values + out.timed_out + out.cancelled == kCount);
    CHECK(out.early == 0);
    CHECK(out.cancelled_unasked == 0);
    CHECK(out.wrong_value == 0);
    CHECK(out.other_errors == 0);
    CHECK(frames.alive() == 0);
    tally.values += out.values.load();
    tally.timed_out += out.timed_out.load();
    tally.cancelled += out.cancelled.load();
}

/// Each outcome occurred, so each path ran. Counted over all rounds: with these odds a round
/// has thousands of each, but a round whose threads the OS holds off for the whole 8 ms of
/// deadlines and stops (a loaded machine) rightly ends with every timer already due, where
/// data already there wins: every item gives its value.
void check_tally(Kind kind, const Tally& tally) {
    CHECK(tally.values > 0);
    CHECK(tally.cancelled > 0);
    if (kind == Kind::kTimeout) CHECK(tally.timed_out > 0);
}

Task<void> timeout_for_an_hour(LifetimeCounter& frames) {
    Counted frame(frames);
    co_await eddy::with_timeout(work(frames, std::chrono::hours(2), 0), std::chrono::hours(1));
}

}  // namespace

TEST_CASE("10,000 concurrent with_timeouts stopped at random: none early, every outcome accounted for") {
    Tally tally;
    for_each_configuration([&tally](std::size_t workers) {
        static int round = 0;
        check_round(Kind::kTimeout, workers, round++, tally);
    });
    check_tally(Kind::kTimeout, tally);
}

TEST_CASE("10,000 concurrent sleeps stopped at random: none early, all resume, none left armed") {
    Tally tally;
    for_each_configuration([&tally](std::size_t workers) {
        static int round = 0;
        check_round(Kind::kSleep, workers, round++, tally);
    });
    check_tally(Kind::kSleep, tally);
}

TEST_CASE("a runtime destroyed with 10,000 timeouts armed for an hour ends at once and leaks nothing") {
    for_each_configuration([](std::size_t workers) {
        LifetimeCounter frames;
        std::vector<JoinHandle<void>> handles;
        {
            eddy::RuntimeConfig config;
            config.workers = workers;
            eddy::Runtime rt(config);
            for (int i = 0; i < kCount; ++i) handles.push_back(rt.spawn(timeout_for_an_hour(frames)));
            // Wait until every timer is armed, so shutdown meets them in the queues.
            while (rt.metrics().reactor.timers_armed < 2 * static_cast<std::size_t>(kCount)) {
                std::this_thread::sleep_for(1ms);
            }
        }
        CHECK(frames.alive() == 0);  // every frame (both timers' awaiters) destroyed by shutdown
    });
}

namespace {

constexpr int kIntervals = 1000;
constexpr int kTicksEach = 20;

/// What the Interval tasks of a round saw, read after the round has joined.
struct IntervalOutcomes {
    std::atomic<int> ticks{0};
    std::atomic<int> cancelled{0};
    std::atomic<int> early{0};         // a tick returned before its time point
    std::atomic<int> off_schedule{0};  // a time point the policy does not allow after the previous one
};

/// Takes kTicksEach ticks of an Interval of `policy`, each under a stop source that a sibling
/// stops after a random delay; checks every time point against the previous one taken.
Task<void> ticker(LifetimeCounter& frames, std::uint64_t item_seed, IntervalOutcomes& out) {
    Counted frame(frames);
    std::mt19937_64 rng(item_seed);
    const auto p = std::chrono::microseconds(500 + rng() % 2500);
    const auto policy = static_cast<eddy::MissedTick>(rng() % 3);
    const auto start = Clock::now();
    eddy::Interval iv = eddy::interval_at(start, p);
    iv.set_missed_tick(policy);
    std::optional<Clock::time_point> last;
    for (int k = 0; k < kTicksEach; ++k) {
        std::stop_source stop;
        const auto stop_at = std::chrono::microseconds(rng() % 4000);
        // One tick in eight is stopped before it is taken: it throws at once, even when due, so
        // every round has cancelled ticks however late a loaded machine runs the others (whose
        // stops race the tick and may all come after it).
        if (rng() % 8 == 0) stop.request_stop();
        auto [at, stopped] = co_await eddy::when_all(
            [](eddy::Interval& i, std::stop_token t) -> Task<std::optional<Clock::time_point>> {
                try {
                    co_return co_await i.tick(std::move(t));
                } catch (const eddy::OperationCancelled&) {
                    co_return std::nullopt;
                }
            }(iv, stop.get_token()),
            stop_later(stop_at, stop));
        (void)stopped;
        if (!at) {
            out.cancelled.fetch_add(1);
            continue;
        }
        out.ticks.fetch_add(1);
        if (Clock::now() < *at) out.early.fetch_add(1);
        // Every policy keeps the first tick, steps of at least a period, and (burst, skip) the
        // grid of start + k * period; burst also misses none.
        bool ok = last ? *at - *last >= p : *at == start;
        if (policy != eddy::MissedTick::delay) ok = ok && (*at - start) % p == Clock::duration::zero();
        if (policy == eddy::MissedTick::burst && last) ok = ok && *at == *last + p;
        if (!ok) out.off_schedule.fetch_add(1);
        last = at;
    }
}

Task<void> run_interval_round(LifetimeCounter& frames, std::uint64_t round_seed, IntervalOutcomes& out) {
    std::vector<JoinHandle<void>> handles;
    handles.reserve(kIntervals);
    for (int i = 0; i < kIntervals; ++i)
        handles.push_back(eddy::spawn(ticker(frames, round_seed + static_cast<std::uint64_t>(i), out)));
    for (JoinHandle<void>& h : handles) co_await std::move(h);
}

}  // namespace

TEST_CASE("1,000 Intervals ticked under random stops: none early, on schedule, cancelled ticks kept") {
    for_each_configuration([](std::size_t workers) {
        static int round = 0;
        LifetimeCounter frames;
        IntervalOutcomes out;
        {
            eddy::RuntimeConfig config;
            config.workers = workers;
            eddy::Runtime rt(config);
            rt.block_on(
                run_interval_round(frames, seed() * 7919 + workers * 100 + static_cast<std::uint64_t>(round++), out));
            CHECK(rt.metrics().reactor.timers_armed == 0);
        }
        CAPTURE(seed());
        CHECK(out.ticks + out.cancelled == kIntervals * kTicksEach);
        CHECK(out.early == 0);
        CHECK(out.off_schedule == 0);
        CHECK(frames.alive() == 0);
        CHECK(out.ticks > 0);
        CHECK(out.cancelled > 0);
    });
}
