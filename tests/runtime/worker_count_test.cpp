// tests/runtime/worker_count_test.cpp: how many workers a Runtime starts (worker_count.hpp),
// and that a bad count makes the Runtime constructor throw.
//
// Tests that set EDDY_WORKERS do it through ScopedEnv, which restores the variable (or its
// absence) on the way out. No Runtime worker reads the environment, and doctest runs the
// cases one after another on this thread, so setenv/unsetenv cannot race with getenv here.
#include <doctest/doctest.h>

#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <eddy/runtime/runtime.hpp>

#include "runtime/worker_count.hpp"
#include "tests/support/scoped_env.hpp"

namespace {

using eddy::test::ScopedEnv;

/// The message of the std::invalid_argument `parse_workers_env(value)` throws, or nullopt.
std::optional<std::string> parse_error(std::string_view value) {
    try {
        (void)eddy::detail::parse_workers_env(value);
    } catch (const std::invalid_argument& e) {
        return std::string(e.what());
    }
    return std::nullopt;
}

} // namespace

TEST_SUITE("runtime/worker_count") {

TEST_CASE("parse_workers_env accepts whole numbers from 1 to 1024") {
    CHECK(eddy::detail::parse_workers_env("1") == 1);
    CHECK(eddy::detail::parse_workers_env("4") == 4);
    CHECK(eddy::detail::parse_workers_env("1024") == 1024);
    CHECK(eddy::detail::kMaxWorkers == 1024);
}

TEST_CASE("parse_workers_env rejects a value outside 1..1024 or not a number, naming EDDY_WORKERS") {
    for (const char* bad : {"0", "-1", "abc", "", "2x", "1025", " 4", "4 ", "+4", "1.5",
                            "99999999999999999999999"}) {
        CAPTURE(bad);
        const std::optional<std::string> message = parse_error(bad);
        REQUIRE(message.has_value());
        CHECK(message->find("EDDY_WORKERS") != std::string::npos);
    }
}

TEST_CASE("parse_workers_env's message quotes the rejected value") {
    const std::optional<std::string> message = parse_error("2x");
    REQUIRE(message.has_value());
    CHECK(message->find("'2x'") != std::string::npos);
}

TEST_CASE("resolve_workers uses the configured count when EDDY_WORKERS is unset") {
    ScopedEnv env("EDDY_WORKERS", nullptr);
    CHECK(eddy::detail::resolve_workers(3) == 3);
}

TEST_CASE("resolve_workers uses the available CPUs when neither the config nor EDDY_WORKERS is set") {
    ScopedEnv env("EDDY_WORKERS", nullptr);
    CHECK(eddy::detail::resolve_workers(std::nullopt) == eddy::detail::available_cpus());
}

TEST_CASE("EDDY_WORKERS overrides the configured count") {
    ScopedEnv env("EDDY_WORKERS", "5");
    CHECK(eddy::detail::resolve_workers(3) == 5);
    CHECK(eddy::detail::resolve_workers(std::nullopt) == 5);
}

TEST_CASE("EDDY_WORKERS overrides even an invalid configured count") {
    ScopedEnv env("EDDY_WORKERS", "2");
    CHECK(eddy::detail::resolve_workers(0) == 2);
}

TEST_CASE("resolve_workers rejects a configured count of 0 or above 1024") {
    ScopedEnv env("EDDY_WORKERS", nullptr);
    CHECK_THROWS_AS((void)eddy::detail::resolve_workers(0), std::invalid_argument);
    CHECK_THROWS_AS((void)eddy::detail::resolve_workers(1025), std::invalid_argument);
    CHECK(eddy::detail::resolve_workers(1024) == 1024);
}

TEST_CASE("available_cpus is at least 1") { CHECK(eddy::detail::available_cpus() >= 1); }

TEST_CASE("a Runtime starts the worker count EDDY_WORKERS gives") {
    ScopedEnv env("EDDY_WORKERS", "3");
    eddy::Runtime rt(eddy::RuntimeConfig{.workers = 1});
    CHECK(rt.workers() == 3);
}

TEST_CASE("a Runtime configured with 0 workers throws std::invalid_argument") {
    ScopedEnv env("EDDY_WORKERS", nullptr);
    CHECK_THROWS_AS(eddy::Runtime(eddy::RuntimeConfig{.workers = 0}), std::invalid_argument);
}

TEST_CASE("a Runtime with EDDY_WORKERS=abc throws std::invalid_argument naming EDDY_WORKERS") {
    ScopedEnv env("EDDY_WORKERS", "abc");
    try {
        eddy::Runtime rt(eddy::RuntimeConfig{.workers = 2});
        FAIL("the constructor did not throw");
    } catch (const std::invalid_argument& e) {
        CHECK(std::string(e.what()).find("EDDY_WORKERS") != std::string::npos);
    }
}

TEST_CASE("a Runtime with EDDY_WORKERS=0 throws std::invalid_argument") {
    ScopedEnv env("EDDY_WORKERS", "0");
    CHECK_THROWS_AS(eddy::Runtime(), std::invalid_argument);
}

} // TEST_SUITE
