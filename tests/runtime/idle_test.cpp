// tests/runtime/idle_test.cpp: white-box tests of runtime/idle.hpp.
//
// Idle is driven here from one thread, playing every worker in turn, so each rule of the
// header (1: wake at most one parked worker, only when nobody searches; 2: at most half
// search; 3: the last searcher to find work reports it; 4: the last searcher to park reports
// it) is checked as an exact sequence of counts. The concurrent use is exercised by the
// runtime tests.
#include "idle.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <optional>
#include <stdexcept>

using eddy::detail::Idle;

TEST_SUITE("runtime/idle") {

TEST_CASE("a new Idle counts every worker as unparked and none as searching") {
    Idle idle(4);
    CHECK(idle.num_unparked() == 4);
    CHECK(idle.num_searching() == 0);
}

TEST_CASE("the constructor rejects zero workers and more than 65535") {
    CHECK_THROWS_AS(Idle{0}, std::invalid_argument);
    CHECK_THROWS_AS(Idle{65536}, std::invalid_argument);
    Idle largest(65535);
    CHECK(largest.num_unparked() == 65535);
}

TEST_CASE("worker_to_notify returns none when no worker is parked") {
    Idle idle(4);
    CHECK(idle.worker_to_notify() == std::nullopt);
    CHECK(idle.num_unparked() == 4);
    CHECK(idle.num_searching() == 0);
}

TEST_CASE("worker_to_notify returns the parked worker when nobody searches") {
    Idle idle(4);
    CHECK_FALSE(idle.transition_to_parked(2, false));
    CHECK(idle.num_unparked() == 3);
    const std::optional<std::size_t> woken = idle.worker_to_notify();
    REQUIRE(woken.has_value());
    CHECK(*woken == 2);
}

TEST_CASE("a notified worker is counted as unparked and searching") {
    Idle idle(4);
    (void)idle.transition_to_parked(1, false);
    REQUIRE(idle.worker_to_notify() == std::optional<std::size_t>{1});
    CHECK(idle.num_unparked() == 4);
    CHECK(idle.num_searching() == 1);
}

TEST_CASE("worker_to_notify wakes each parked worker once and then returns none") {
    Idle idle(4);
    (void)idle.transition_to_parked(0, false);
    (void)idle.transition_to_parked(3, false);
    const auto first = idle.worker_to_notify();
    REQUIRE(first.has_value());
    // The first notified worker is now searching: rule 1 holds further wake-ups back.
    CHECK(idle.worker_to_notify() == std::nullopt);
    CHECK(idle.transition_from_searching());  // it found work and was the last searcher
    const auto second = idle.worker_to_notify();
    REQUIRE(second.has_value());
    CHECK(*first != *second);
    CHECK((*first == 0 || *first == 3));
    CHECK((*second == 0 || *second == 3));
    CHECK(idle.transition_from_searching());
    CHECK(idle.worker_to_notify() == std::nullopt);  // nobody is parked any more
    CHECK(idle.num_unparked() == 4);
    CHECK(idle.num_searching() == 0);
}

TEST_CASE("worker_to_notify returns none while a worker searches, even with one parked") {
    Idle idle(4);
    (void)idle.transition_to_parked(3, false);
    REQUIRE(idle.transition_to_searching());
    CHECK(idle.worker_to_notify() == std::nullopt);
    CHECK(idle.num_unparked() == 3);
    CHECK(idle.num_searching() == 1);
    CHECK_FALSE(idle.transition_from_parked(3));  // not taken off the sleeper list
}

TEST_CASE("transition_to_searching refuses once half the workers search") {
    Idle idle(4);
    CHECK(idle.transition_to_searching());
    CHECK(idle.transition_to_searching());
    CHECK_FALSE(idle.transition_to_searching());
    CHECK(idle.num_searching() == 2);
}

TEST_CASE("transition_to_searching lets the single worker of a one-worker runtime search") {
    Idle idle(1);
    CHECK(idle.transition_to_searching());
    CHECK_FALSE(idle.transition_to_searching());
    CHECK(idle.num_searching() == 1);
}

TEST_CASE("transition_to_searching allows the larger half of an odd worker count") {
    Idle idle(5);
    CHECK(idle.transition_to_searching());
    CHECK(idle.transition_to_searching());
    CHECK(idle.transition_to_searching());
    CHECK_FALSE(idle.transition_to_searching());
    CHECK(idle.num_searching() == 3);
}

TEST_CASE("transition_to_searching allows searching again after a searcher stops") {
    Idle idle(2);
    REQUIRE(idle.transition_to_searching());
    REQUIRE_FALSE(idle.transition_to_searching());
    CHECK(idle.transition_from_searching());
    CHECK(idle.transition_to_searching());
}

TEST_CASE("transition_from_searching reports true only for the last searcher") {
    Idle idle(4);
    REQUIRE(idle.transition_to_searching());
    REQUIRE(idle.transition_to_searching());
    CHECK_FALSE(idle.transition_from_searching());
    CHECK(idle.num_searching() == 1);
    CHECK(idle.transition_from_searching());
    CHECK(idle.num_searching() == 0);
    CHECK(idle.num_unparked() == 4);
}

TEST_CASE("transition_to_parked reports true only for the last searcher") {
    Idle idle(4);
    REQUIRE(idle.transition_to_searching());
    REQUIRE(idle.transition_to_searching());
    CHECK_FALSE(idle.transition_to_parked(0, true));
    CHECK(idle.num_searching() == 1);
    CHECK(idle.transition_to_parked(1, true));
    CHECK(idle.num_searching() == 0);
    CHECK(idle.num_unparked() == 2);
}

TEST_CASE("transition_to_parked of a worker that was not searching reports false") {
    Idle idle(4);
    REQUIRE(idle.transition_to_searching());  // someone else is the (last) searcher
    CHECK_FALSE(idle.transition_to_parked(2, false));
    CHECK(idle.num_searching() == 1);
    CHECK(idle.num_unparked() == 3);
}

TEST_CASE("transition_from_parked is true after the worker was notified") {
    Idle idle(2);
    (void)idle.transition_to_parked(1, false);
    REQUIRE(idle.worker_to_notify() == std::optional<std::size_t>{1});
    CHECK(idle.transition_from_parked(1));
}

TEST_CASE("transition_from_parked is false while the worker is still on the sleeper list") {
    Idle idle(2);
    (void)idle.transition_to_parked(1, false);
    CHECK_FALSE(idle.transition_from_parked(1));  // a spurious wake-up
    CHECK(idle.num_unparked() == 1);
    // Still parked: a later notification finds it.
    CHECK(idle.worker_to_notify() == std::optional<std::size_t>{1});
    CHECK(idle.transition_from_parked(1));
}

TEST_CASE("a worker parked by transition_to_parked is woken even when it was the last searcher") {
    Idle idle(2);
    REQUIRE(idle.transition_to_searching());
    CHECK(idle.transition_to_parked(0, true));  // rule 4: the caller must look once more
    CHECK(idle.num_searching() == 0);
    CHECK(idle.worker_to_notify() == std::optional<std::size_t>{0});
    CHECK(idle.num_searching() == 1);
    CHECK(idle.num_unparked() == 2);
}

TEST_CASE("worker_to_notify returns none once every worker is parked and woken") {
    Idle idle(3);
    for (std::size_t w = 0; w < 3; ++w) (void)idle.transition_to_parked(w, false);
    CHECK(idle.num_unparked() == 0);
    for (int i = 0; i < 3; ++i) {
        const auto woken = idle.worker_to_notify();
        REQUIRE(woken.has_value());
        CHECK(idle.transition_from_parked(*woken));
        (void)idle.transition_from_searching();  // it found work
    }
    CHECK(idle.worker_to_notify() == std::nullopt);
    CHECK(idle.num_unparked() == 3);
    CHECK(idle.num_searching() == 0);
}

TEST_CASE("unpark_for_shutdown takes a parked worker off the sleeper list") {
    Idle idle(2);
    (void)idle.transition_to_parked(0, false);
    idle.unpark_for_shutdown(0);
    CHECK(idle.num_unparked() == 2);
    CHECK(idle.num_searching() == 0);
    CHECK(idle.transition_from_parked(0));
    CHECK(idle.worker_to_notify() == std::nullopt);
}

TEST_CASE("unpark_for_shutdown of a worker that is not parked changes nothing") {
    Idle idle(2);
    idle.unpark_for_shutdown(1);
    CHECK(idle.num_unparked() == 2);
    CHECK(idle.num_searching() == 0);
}

}  // TEST_SUITE("runtime/idle")
