// tests/time/timer_wheel_test.cpp: the timing wheel of io/time/timer_wheel.hpp, white box,
// without a Runtime. Targeted cases (equal deadlines, deadlines in the current tick, already past, at
// zero or below, farther than the wheel reaches, removal from the heap's root and from below
// it), then a model-based run: random inserts, removals and pops checked against a multimap.
//
// What every case checks is what the reactor relies on:
//  - nothing pops before its deadline, and everything due by `now` pops once asked;
//  - pops come earliest first;
//  - insert() and next_wake() never name a time later than a deadline they hold (else the
//    reactor would sleep through it), and waking at next_wake() makes progress (else it
//    would spin).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "time/timer_wheel.hpp"

using eddy::detail::TimerEntry;
using eddy::detail::TimerWheel;

namespace {

constexpr std::int64_t kMs = 1'000'000;
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

/// Pops everything due by `now`; returns the deadlines in the order popped.
std::vector<std::int64_t> pop_all(TimerWheel& wheel, std::int64_t now) {
    std::vector<std::int64_t> out;
    while (wheel.pop_expired(now, 64, [&](TimerEntry& e) { out.push_back(e.deadline_ns); }) == 64) {
    }
    return out;
}

std::unique_ptr<TimerEntry> entry(std::int64_t deadline) {
    auto e = std::make_unique<TimerEntry>();
    e->deadline_ns = deadline;
    return e;
}

}  // namespace

TEST_CASE("an empty wheel needs no wake and pops nothing") {
    TimerWheel wheel(5 * kMs);
    CHECK(wheel.empty());
    CHECK(wheel.next_wake() == TimerWheel::kNone);
    CHECK(pop_all(wheel, kMax - 1).empty());
}

TEST_CASE("a timer pops at its deadline, not a nanosecond before") {
    const std::int64_t start = 1000 * kMs;
    for (std::int64_t delay : {std::int64_t{1}, std::int64_t{65'535}, std::int64_t{65'536}, 3 * kMs, 5 * kMs, 300 * kMs,
                               20'000 * kMs, 3'600'000 * kMs}) {
        CAPTURE(delay);
        TimerWheel wheel(start);
        auto e = entry(start + delay);
        CHECK(wheel.insert(e.get()) <= e->deadline_ns);
        CHECK_FALSE(wheel.empty());
        // Walk forward the way the reactor does: wake at next_wake(), pop, repeat.
        std::int64_t now = start;
        int wakes = 0;
        std::vector<std::int64_t> popped;
        while (popped.empty() && wakes < 100) {
            const std::int64_t wake = wheel.next_wake();
            REQUIRE(wake <= e->deadline_ns);
            REQUIRE(wake > now - 1);  // the wake moves forward (or stays at a due heap entry)
            now = std::max(now, wake);
            if (now < e->deadline_ns) CHECK(pop_all(wheel, now).empty());
            popped = pop_all(wheel, now);
            ++wakes;
        }
        REQUIRE(popped.size() == 1);
        CHECK(popped[0] == e->deadline_ns);
        CHECK(now == e->deadline_ns);             // woken exactly at the deadline, never before
        CHECK(wakes <= TimerWheel::kLevels + 1);  // a cascade per level at most
        CHECK(wheel.empty());
    }
}

TEST_CASE("deadlines already past, at zero or below pop at once") {
    TimerWheel wheel(10 * kMs);
    auto past = entry(1 * kMs);
    auto zero = entry(0);
    auto negative = entry(-5);
    for (TimerEntry* e : {past.get(), zero.get(), negative.get()}) {
        CHECK(wheel.insert(e) == e->deadline_ns);  // the heap: needs the reactor at its deadline
    }
    CHECK(wheel.next_wake() == -5);
    CHECK(pop_all(wheel, 10 * kMs) == std::vector<std::int64_t>{-5, 0, 1 * kMs});
    CHECK(wheel.empty());
}

TEST_CASE("deadlines in the current tick are kept exact") {
    const std::int64_t start = 7 * (std::int64_t{1} << TimerWheel::kTickShift);  // a tick's start
    TimerWheel wheel(start);
    auto late = entry(start + 900);
    auto early = entry(start + 100);
    CHECK(wheel.insert(late.get()) == start + 900);
    CHECK(wheel.insert(early.get()) == start + 100);
    CHECK(wheel.next_wake() == start + 100);
    CHECK(pop_all(wheel, start + 99).empty());
    CHECK(pop_all(wheel, start + 100) == std::vector<std::int64_t>{start + 100});
    CHECK(pop_all(wheel, start + 899).empty());
    CHECK(pop_all(wheel, start + 900) == std::vector<std::int64_t>{start + 900});
}

TEST_CASE("equal deadlines all pop, once each") {
    TimerWheel wheel(0);
    std::vector<std::unique_ptr<TimerEntry>> entries;
    std::set<TimerEntry*> seen;
    for (int i = 0; i < 200; ++i) {
        entries.push_back(entry(42 * kMs));
        wheel.insert(entries.back().get());
    }
    CHECK(pop_all(wheel, 42 * kMs - 1).empty());
    std::size_t n = 0;
    while (wheel.pop_expired(42 * kMs, 64, [&](TimerEntry& e) { seen.insert(&e); }) > 0) ++n;
    CHECK(seen.size() == 200);
    CHECK(n == 4);  // rounds of at most 64
    CHECK(wheel.empty());
}

TEST_CASE("a deadline beyond the wheel's reach waits in its last level and still fires exactly") {
    TimerWheel wheel(0);
    const std::int64_t span = std::int64_t{1}
                              << (TimerWheel::kTickShift + TimerWheel::kLevelBits * TimerWheel::kLevels);
    auto far = entry(3 * span + 12345);
    auto never = entry(kMax);
    CHECK(wheel.insert(far.get()) <= far->deadline_ns);
    CHECK(wheel.insert(never.get()) <= kMax);
    std::int64_t now = 0;
    std::vector<std::int64_t> popped;
    for (int wakes = 0; popped.empty() && wakes < 1000; ++wakes) {
        const std::int64_t wake = wheel.next_wake();
        REQUIRE(wake <= far->deadline_ns);
        REQUIRE(wake >= now);
        now = wake;
        popped = pop_all(wheel, now);
    }
    CHECK(popped == std::vector<std::int64_t>{far->deadline_ns});
    CHECK(now == far->deadline_ns);
    // The one at INT64_MAX is still there and never due.
    CHECK_FALSE(wheel.empty());
    CHECK(wheel.next_wake() <= kMax);
    wheel.remove(never.get());
    CHECK(wheel.empty());
    CHECK(wheel.next_wake() == TimerWheel::kNone);
}

TEST_CASE("removal from the heap's root, from below it and from a wheel slot") {
    TimerWheel wheel(100 * kMs);
    auto a = entry(10 * kMs);  // past: the heap
    auto b = entry(20 * kMs);
    auto c = entry(30 * kMs);
    auto d = entry(40 * kMs);
    auto wheeled = entry(500 * kMs);
    for (TimerEntry* e : {a.get(), b.get(), c.get(), d.get(), wheeled.get()}) wheel.insert(e);
    wheel.remove(a.get());  // the root
    CHECK(wheel.next_wake() == 20 * kMs);
    wheel.remove(c.get());        // below the root
    wheel.remove(wheeled.get());  // a slot
    CHECK(pop_all(wheel, kMax - 1) == std::vector<std::int64_t>{20 * kMs, 40 * kMs});
    CHECK(wheel.empty());
}

TEST_CASE("take_all hands back every entry, wherever it is") {
    TimerWheel wheel(50 * kMs);
    std::vector<std::unique_ptr<TimerEntry>> entries;
    for (std::int64_t d : {1 * kMs, 49 * kMs, 50 * kMs + 10, 51 * kMs, 900 * kMs, 86'400'000 * kMs, kMax}) {
        entries.push_back(entry(d));
        wheel.insert(entries.back().get());
    }
    pop_all(wheel, 0);  // nothing due; leaves the past ones in the heap
    std::set<TimerEntry*> taken;
    wheel.take_all([&](TimerEntry& e) { taken.insert(&e); });
    CHECK(taken.size() == entries.size());
    CHECK(wheel.empty());
    CHECK(wheel.next_wake() == TimerWheel::kNone);
}

TEST_CASE("model: random inserts, removals and pops against a multimap") {
    for (std::uint32_t seed = 1; seed <= 20; ++seed) {
        CAPTURE(seed);
        std::mt19937_64 rng(seed);
        const std::int64_t start = static_cast<std::int64_t>(rng() % (1'000'000 * kMs));
        TimerWheel wheel(start);
        std::vector<std::unique_ptr<TimerEntry>> pool;
        std::multimap<std::int64_t, TimerEntry*> model;
        std::vector<TimerEntry*> live;  // the model's entries, for picking one at random
        std::int64_t now = start;

        auto random_deadline = [&]() -> std::int64_t {
            switch (rng() % 8) {
            case 0:
                return now - static_cast<std::int64_t>(rng() % (5 * kMs));  // past
            case 1:
                return now + static_cast<std::int64_t>(rng() % 70'000);  // this tick or next
            case 2:
                return now + static_cast<std::int64_t>(rng() % (5 * kMs));
            case 3:
                return now + static_cast<std::int64_t>(rng() % (300 * kMs));
            case 4:
                return now + static_cast<std::int64_t>(rng() % (20'000 * kMs));
            case 5:
                return now + static_cast<std::int64_t>(rng() % (10'000'000 * kMs));
            case 6:
                return kMax - static_cast<std::int64_t>(rng() % 3);
            default: {  // equal to one already queued
                if (live.empty()) return now + kMs;
                return live[rng() % live.size()]->deadline_ns;
            }
            }
        };

        for (int step = 0; step < 20'000; ++step) {
            const auto op = rng() % 10;
            if (op < 5) {
                pool.push_back(entry(random_deadline()));
                TimerEntry* e = pool.back().get();
                REQUIRE(wheel.insert(e) <= e->deadline_ns);
                model.emplace(e->deadline_ns, e);
                live.push_back(e);
            } else if (op < 8 && !live.empty()) {
                const std::size_t i = rng() % live.size();
                TimerEntry* e = live[i];
                wheel.remove(e);
                auto [lo, hi] = model.equal_range(e->deadline_ns);
                model.erase(std::find_if(lo, hi, [&](const auto& kv) { return kv.second == e; }));
                live[i] = live.back();
                live.pop_back();
            } else {
                // Move time forward: sometimes to the next wake, sometimes a random step.
                const std::int64_t wake = wheel.next_wake();
                if (!model.empty()) REQUIRE(wake <= model.begin()->first);
                else REQUIRE(wake == TimerWheel::kNone);
                std::int64_t to = now + static_cast<std::int64_t>(rng() % (2 * kMs));
                if (rng() % 2 == 0 && wake != TimerWheel::kNone && wake < kMax - kMs) to = std::max(now, wake);
                now = to;
                std::int64_t last = std::numeric_limits<std::int64_t>::min();
                std::size_t popped_count = 0;
                wheel.pop_expired(now, 1'000'000, [&](TimerEntry& e) {
                    REQUIRE(e.deadline_ns <= now);   // never early
                    REQUIRE(e.deadline_ns >= last);  // earliest first
                    last = e.deadline_ns;
                    auto [lo, hi] = model.equal_range(e.deadline_ns);
                    auto it = std::find_if(lo, hi, [&](const auto& kv) { return kv.second == &e; });
                    REQUIRE(it != hi);  // popped once, and only what was queued
                    model.erase(it);
                    live.erase(std::find(live.begin(), live.end(), &e));
                    ++popped_count;
                });
                // Everything due by now came out.
                if (!model.empty()) REQUIRE(model.begin()->first > now);
                // Progress: a wake at or before now would have popped something.
                if (!model.empty()) REQUIRE(wheel.next_wake() > now);
            }
            REQUIRE(wheel.empty() == model.empty());
        }
        std::size_t taken = 0;
        wheel.take_all([&](TimerEntry&) { ++taken; });
        CHECK(taken == model.size());
        CHECK(wheel.empty());
    }
}
