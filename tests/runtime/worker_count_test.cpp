// tests/runtime/worker_count_test.cpp: how many workers a Runtime starts (worker_count.hpp),
// and that a bad count makes the Runtime constructor throw.
//
// No environment is read here: EDDY_WORKERS counts only through RuntimeConfig::from_env(),
// whose parsing and precedence tests/runtime/config_env_test.cpp checks. The cases that set it
// here do so through ScopedEnv (restored on the way out) to show it changes nothing.
#include <doctest/doctest.h>

#include <optional>
#include <stdexcept>

#include <eddy/runtime/runtime.hpp>

#include "worker_count.hpp"
#include "support/scoped_env.hpp"

namespace {

using eddy::test::ScopedEnv;

}  // namespace

TEST_SUITE("runtime/worker_count") {

TEST_CASE("resolve_workers uses the configured count") {
    CHECK(eddy::detail::resolve_workers(3) == 3);
    CHECK(eddy::detail::resolve_workers(1024) == 1024);
    CHECK(eddy::detail::kMaxWorkers == 1024);
}

TEST_CASE("resolve_workers uses the available CPUs when no count is configured") {
    CHECK(eddy::detail::resolve_workers(std::nullopt) == eddy::detail::available_cpus());
}

TEST_CASE("resolve_workers does not read EDDY_WORKERS") {
    ScopedEnv env("EDDY_WORKERS", "5");
    CHECK(eddy::detail::resolve_workers(3) == 3);
    CHECK(eddy::detail::resolve_workers(std::nullopt) == eddy::detail::available_cpus());
}

TEST_CASE("available_cpus is at least 1") { CHECK(eddy::detail::available_cpus() >= 1); }

TEST_CASE("a Runtime starts the configured worker count") {
    eddy::Runtime rt(eddy::RuntimeConfig{.workers = 3});
    CHECK(rt.workers() == 3);
}

TEST_CASE("a Runtime configured with 0 or 1025 workers throws std::invalid_argument") {
    CHECK_THROWS_AS(eddy::Runtime(eddy::RuntimeConfig{.workers = 0}), std::invalid_argument);
    CHECK_THROWS_AS(eddy::Runtime(eddy::RuntimeConfig{.workers = 1025}), std::invalid_argument);
}

}  // TEST_SUITE("runtime/worker_count")
