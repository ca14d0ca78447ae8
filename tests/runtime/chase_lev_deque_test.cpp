// tests/runtime/chase_lev_deque_test.cpp: white-box tests of runtime/chase_lev_deque.hpp.
//
// The single-threaded cases pin the owner's and the thief's contract one behaviour at a time
// (LIFO pop, FIFO steal of the oldest half, the full deque, pop_top_batch). The threaded
// cases run one owner against three thieves and check the only property that matters for a
// scheduler: every pushed item is taken exactly once, never lost and never duplicated. The
// capacity-2 and capacity-4 variants make the full deque and the owner/thief race on the
// last item (the `t == b` case of the header's analysis) happen on most operations.
// tests/stress/deque_stress_test.cpp repeats the threaded cases with more rounds.
#include "chase_lev_deque.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <latch>
#include <stdexcept>
#include <thread>
#include <vector>

using eddy::detail::ChaseLevDeque;

namespace {

std::vector<int> pop_all(ChaseLevDeque<int>& d) {
    std::vector<int> out;
    int x = 0;
    while (d.pop(x)) out.push_back(x);
    return out;
}

struct Outcome {
    std::vector<int> counts;  // how many times each value was taken
    std::size_t stolen = 0;   // how many of the takes were by thieves (reported, not asserted)
};

/// One owner pushes `items` distinct values (interleaving pops and pop_tops, and popping to
/// make room when the deque is full) while `thieves` threads steal into their own deques and
/// drain them.
Outcome owner_versus_thieves(std::size_t capacity, std::size_t items, int thieves) {
    std::vector<std::atomic<std::uint8_t>> taken(items);
    std::atomic<std::size_t> stolen{0};
    auto record = [&taken](std::uintptr_t v) {
        // Relaxed: only the final counts matter; the joins below order them before the check.
        taken[v].fetch_add(1, std::memory_order_relaxed);
    };

    ChaseLevDeque<std::uintptr_t> victim(capacity);
    std::atomic<bool> owner_done{false};
    std::atomic<int> miscounted_steals{0};  // checked here, not with CHECK on the thieves
    std::latch started(thieves + 1);        // the owner starts once every thief is running
    std::vector<std::thread> threads;
    for (int i = 0; i < thieves; ++i) {
        threads.emplace_back([&] {
            ChaseLevDeque<std::uintptr_t> own(capacity);
            started.arrive_and_wait();
            for (;;) {
                // Read before stealing: if the owner was done before this attempt and the
                // attempt finds nothing, the victim is empty for good.
                const bool done = owner_done.load(std::memory_order_acquire);
                std::uintptr_t first = 0;
                const std::size_t n = victim.steal_into(own, first);
                if (n > 0) {
                    stolen.fetch_add(n, std::memory_order_relaxed);
                    record(first);
                    std::uintptr_t x = 0;
                    std::size_t drained = 0;
                    while (own.pop(x)) {
                        record(x);
                        ++drained;
                    }
                    if (drained != n - 1) miscounted_steals.fetch_add(1, std::memory_order_relaxed);
                } else if (done) {
                    return;
                } else {
                    std::this_thread::yield();  // the machine may have fewer cores than threads
                }
            }
        });
    }

    started.arrive_and_wait();
    std::uintptr_t x = 0;
    for (std::uintptr_t v = 0; v < items; ++v) {
        while (!victim.push(v)) {
            // Full: make room the way a worker would run its newest task.
            if (victim.pop(x)) record(x);
        }
        if (v % 3 == 0 && victim.pop(x)) record(x);
        if (v % 7 == 0 && victim.pop_top(x)) record(x);  // the owner's fairness pop races thieves
        // Lets the thieves in on a machine with fewer cores than threads; not a synchronization.
        if (v % (2 * capacity) == 0) std::this_thread::yield();
    }
    while (victim.pop(x)) record(x);
    CHECK(victim.empty());
    owner_done.store(true, std::memory_order_release);
    for (auto& t : threads) t.join();
    CHECK(miscounted_steals.load() == 0);

    Outcome out;
    out.counts.resize(items);
    for (std::size_t i = 0; i < items; ++i) out.counts[i] = taken[i].load(std::memory_order_relaxed);
    out.stolen = stolen.load(std::memory_order_relaxed);
    return out;
}

void check_each_taken_once(const Outcome& outcome) {
    MESSAGE("thieves took " << outcome.stolen << " of " << outcome.counts.size() << " items");
    const std::vector<int>& counts = outcome.counts;
    const auto lost = std::count(counts.begin(), counts.end(), 0);
    const auto duplicated = std::count_if(counts.begin(), counts.end(), [](int c) { return c > 1; });
    CHECK(lost == 0);
    CHECK(duplicated == 0);
}

}  // namespace

TEST_SUITE("runtime/chase_lev_deque") {

TEST_CASE("pop returns the most recently pushed item first") {
    ChaseLevDeque<int> d(8);
    REQUIRE(d.push(1));
    REQUIRE(d.push(2));
    REQUIRE(d.push(3));
    CHECK(pop_all(d) == std::vector<int>{3, 2, 1});
}

TEST_CASE("pop on an empty deque returns false and leaves the output untouched") {
    ChaseLevDeque<int> d(4);
    int out = 42;
    CHECK_FALSE(d.pop(out));
    CHECK(out == 42);
    CHECK(d.empty());
}

TEST_CASE("pops on an empty deque do not disturb later pushes") {
    ChaseLevDeque<int> d(4);
    int out = 0;
    for (int i = 0; i < 10; ++i) CHECK_FALSE(d.pop(out));
    REQUIRE(d.push(7));
    CHECK(d.size() == 1);
    REQUIRE(d.pop(out));
    CHECK(out == 7);
    CHECK_FALSE(d.pop(out));
}

TEST_CASE("push returns false when the deque is full and keeps its contents") {
    ChaseLevDeque<int> d(4);
    CHECK(d.capacity() == 4);
    for (int i = 0; i < 4; ++i) REQUIRE(d.push(i));
    CHECK_FALSE(d.push(99));
    CHECK(d.size() == 4);
    CHECK(pop_all(d) == std::vector<int>{3, 2, 1, 0});
}

TEST_CASE("a full deque accepts a push again after one pop") {
    ChaseLevDeque<int> d(2);
    REQUIRE(d.push(1));
    REQUIRE(d.push(2));
    CHECK_FALSE(d.push(3));
    int out = 0;
    REQUIRE(d.pop(out));
    CHECK(out == 2);
    CHECK(d.push(3));
    CHECK(pop_all(d) == std::vector<int>{3, 1});
}

TEST_CASE("a full deque accepts a push again after a steal") {
    ChaseLevDeque<int> d(2);
    ChaseLevDeque<int> thief(2);
    REQUIRE(d.push(1));
    REQUIRE(d.push(2));
    CHECK_FALSE(d.push(3));
    int first = 0;
    REQUIRE(d.steal_into(thief, first) == 1);
    CHECK(first == 1);
    CHECK(d.push(3));
    CHECK(pop_all(d) == std::vector<int>{3, 2});
}

TEST_CASE("top_index counts every item taken from the top, by the owner or by a thief") {
    // A worker marks a share of global wake-ups by the index past its end and lets the global
    // queue wait while the top is below it (runtime/worker.hpp, "Input first"): the index has
    // to move for a thief's steal as for the owner's own pops, and never for a push.
    ChaseLevDeque<int> d(16);
    ChaseLevDeque<int> thief(16);
    CHECK(d.top_index() == 0);
    CHECK(d.bottom_index() == 0);
    for (int i = 0; i < 8; ++i) REQUIRE(d.push(i));
    const std::int64_t share_end = d.bottom_index();
    CHECK(share_end == 8);
    CHECK(d.top_index() == 0);
    int x = -1;
    REQUIRE(d.pop_top(x));  // the owner runs the share's oldest
    CHECK(x == 0);
    CHECK(d.top_index() == 1);
    int first = -1;
    const std::size_t stolen = d.steal_into(thief, first);  // a thief takes half of the rest
    CHECK(stolen == 4);
    CHECK(first == 1);
    CHECK(d.top_index() == 5);
    REQUIRE(d.push(100));  // a younger wake-up of the owner's own
    CHECK(d.top_index() == 5);
    CHECK(d.bottom_index() == 9);
    // Three of the share are left, and its turn ends after them. (A count of the share's 8
    // items, taken down by the owner's own pops only, would still say 4 then.)
    for (int want = 5; want < 8; ++want) {
        CHECK(d.top_index() < share_end);
        REQUIRE(d.pop_top(x));
        CHECK(x == want);
    }
    CHECK(d.top_index() == share_end);
    REQUIRE(d.pop_top(x));
    CHECK(x == 100);
    CHECK(d.top_index() == 9);
}

TEST_CASE("the ring keeps order across many wrap-arounds") {
    ChaseLevDeque<int> d(4);
    ChaseLevDeque<int> thief(4);
    int next = 0;
    for (int round = 0; round < 1000; ++round) {
        // Push three, steal the oldest, pop the newest, pop the remaining one: indices move on
        // by three per round, so every slot is reused many times.
        REQUIRE(d.push(next));
        REQUIRE(d.push(next + 1));
        REQUIRE(d.push(next + 2));
        int first = -1;
        REQUIRE(d.steal_into(thief, first) == 2);  // half of three, rounded up
        CHECK(first == next);
        int stolen_second = -1;
        REQUIRE(thief.pop(stolen_second));
        CHECK(stolen_second == next + 1);
        int out = -1;
        REQUIRE(d.pop(out));
        CHECK(out == next + 2);
        CHECK(d.empty());
        next += 3;
    }
}

TEST_CASE("pop_top_batch takes the oldest items in push order") {
    ChaseLevDeque<int> d(8);
    for (int i = 1; i <= 6; ++i) REQUIRE(d.push(i));
    int out[4] = {};
    REQUIRE(d.pop_top_batch(out, 4) == 4);
    CHECK(out[0] == 1);
    CHECK(out[1] == 2);
    CHECK(out[2] == 3);
    CHECK(out[3] == 4);
    CHECK(d.size() == 2);
    CHECK(pop_all(d) == std::vector<int>{6, 5});
}

TEST_CASE("pop_top_batch takes no more than the deque holds") {
    ChaseLevDeque<int> d(8);
    REQUIRE(d.push(1));
    REQUIRE(d.push(2));
    int out[8] = {};
    CHECK(d.pop_top_batch(out, 8) == 2);
    CHECK(out[0] == 1);
    CHECK(out[1] == 2);
    CHECK(d.empty());
}

TEST_CASE("pop_top_batch on an empty deque takes nothing") {
    ChaseLevDeque<int> d(4);
    int out[2] = {-1, -1};
    CHECK(d.pop_top_batch(out, 2) == 0);
    CHECK(d.empty());
    REQUIRE(d.push(5));
    int x = 0;
    REQUIRE(d.pop(x));
    CHECK(x == 5);
}

TEST_CASE("pop_top takes the oldest item") {
    ChaseLevDeque<int> d(8);
    for (int i = 1; i <= 3; ++i) REQUIRE(d.push(i));
    int out = 0;
    REQUIRE(d.pop_top(out));
    CHECK(out == 1);
    CHECK(d.size() == 2);
    CHECK(pop_all(d) == std::vector<int>{3, 2});
}

TEST_CASE("pop_top on an empty deque returns false and leaves the output untouched") {
    ChaseLevDeque<int> d(4);
    int out = -1;
    CHECK_FALSE(d.pop_top(out));
    CHECK(out == -1);
    REQUIRE(d.push(4));
    REQUIRE(d.pop_top(out));
    CHECK(out == 4);
    CHECK_FALSE(d.pop_top(out));
    CHECK(d.empty());
}

TEST_CASE("steal_into takes half rounded up, returning the oldest and queuing the rest") {
    ChaseLevDeque<int> victim(16);
    ChaseLevDeque<int> thief(16);
    for (int i = 0; i < 8; ++i) REQUIRE(victim.push(i));
    int first = -1;
    CHECK(victim.steal_into(thief, first) == 4);
    CHECK(first == 0);
    CHECK(thief.size() == 3);
    CHECK(pop_all(thief) == std::vector<int>{3, 2, 1});
    CHECK(victim.size() == 4);
    CHECK(pop_all(victim) == std::vector<int>{7, 6, 5, 4});
}

TEST_CASE("steal_into of an odd count takes the larger half") {
    ChaseLevDeque<int> victim(8);
    ChaseLevDeque<int> thief(8);
    for (int i = 0; i < 5; ++i) REQUIRE(victim.push(i));
    int first = -1;
    CHECK(victim.steal_into(thief, first) == 3);
    CHECK(first == 0);
    CHECK(pop_all(thief) == std::vector<int>{2, 1});
    CHECK(victim.size() == 2);
}

TEST_CASE("steal_into takes the single item of a one-item deque") {
    ChaseLevDeque<int> victim(4);
    ChaseLevDeque<int> thief(4);
    REQUIRE(victim.push(9));
    int first = -1;
    CHECK(victim.steal_into(thief, first) == 1);
    CHECK(first == 9);
    CHECK(thief.empty());
    CHECK(victim.empty());
    int x = 0;
    CHECK_FALSE(victim.pop(x));
}

TEST_CASE("steal_into on an empty deque steals nothing and leaves first untouched") {
    ChaseLevDeque<int> victim(4);
    ChaseLevDeque<int> thief(4);
    int first = -1;
    CHECK(victim.steal_into(thief, first) == 0);
    CHECK(first == -1);
    CHECK(thief.empty());
}

TEST_CASE("steal_into takes no more than the thief's deque has room for, plus the returned one") {
    ChaseLevDeque<int> victim(16);
    ChaseLevDeque<int> thief(4);
    for (int i = 0; i < 12; ++i) REQUIRE(victim.push(i));
    for (int i = 100; i < 103; ++i) REQUIRE(thief.push(i));  // one free slot left
    int first = -1;
    CHECK(victim.steal_into(thief, first) == 2);
    CHECK(first == 0);
    CHECK(thief.size() == 4);
    CHECK(pop_all(thief) == std::vector<int>{1, 102, 101, 100});
    CHECK(victim.size() == 10);
}

TEST_CASE("steal_into into a full thief deque still returns one item") {
    ChaseLevDeque<int> victim(8);
    ChaseLevDeque<int> thief(2);
    for (int i = 0; i < 6; ++i) REQUIRE(victim.push(i));
    REQUIRE(thief.push(50));
    REQUIRE(thief.push(51));
    int first = -1;
    CHECK(victim.steal_into(thief, first) == 1);
    CHECK(first == 0);
    CHECK(pop_all(thief) == std::vector<int>{51, 50});
    CHECK(victim.size() == 5);
}

TEST_CASE("size and empty follow pushes, pops and steals") {
    ChaseLevDeque<int> d(8);
    ChaseLevDeque<int> thief(8);
    CHECK(d.empty());
    CHECK(d.size() == 0);
    for (int i = 0; i < 6; ++i) REQUIRE(d.push(i));
    CHECK_FALSE(d.empty());
    CHECK(d.size() == 6);
    int x = 0;
    REQUIRE(d.pop(x));
    CHECK(d.size() == 5);
    int first = 0;
    REQUIRE(d.steal_into(thief, first) == 3);
    CHECK(d.size() == 2);
    CHECK(thief.size() == 2);
    int out[2];
    REQUIRE(d.pop_top_batch(out, 2) == 2);
    CHECK(d.empty());
    CHECK(d.size() == 0);
}

TEST_CASE("the constructor rejects a capacity that is not a power of two of at least 2") {
    for (std::size_t bad :
         {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{6}, std::size_t{100}, std::size_t{255}}) {
        CAPTURE(bad);
        CHECK_THROWS_AS(ChaseLevDeque<int>{bad}, std::invalid_argument);
    }
}

TEST_CASE("the constructor accepts powers of two and reports them as the capacity") {
    for (std::size_t good : {std::size_t{2}, std::size_t{4}, std::size_t{256}, std::size_t{4096}}) {
        CAPTURE(good);
        ChaseLevDeque<int> d(good);
        CHECK(d.capacity() == good);
        CHECK(d.empty());
    }
}

TEST_CASE("with three thieves stealing, every item pushed by the owner is taken exactly once") {
    check_each_taken_once(owner_versus_thieves(256, 200'000, 3));
}

TEST_CASE("with a capacity-4 deque and three thieves, every item is taken exactly once") {
    check_each_taken_once(owner_versus_thieves(4, 100'000, 3));
}

TEST_CASE("with a capacity-2 deque and three thieves, every item is taken exactly once") {
    check_each_taken_once(owner_versus_thieves(2, 100'000, 3));
}

}  // TEST_SUITE("runtime/chase_lev_deque")
