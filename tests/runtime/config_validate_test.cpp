// tests/runtime/config_validate_test.cpp: the Runtime constructor validates every field of
// RuntimeConfig (eddy/runtime/config.hpp): each bad one is rejected, naming the field and its
// range, and the ends of every range are accepted.
//
// The environment is cleared only through CleanEnv (tests/support/runtime_config.hpp).
#include <doctest/doctest.h>

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <eddy/eddy.hpp>

#include "settings.hpp"
#include "support/scoped_env.hpp"
#include "support/stderr_capture.hpp"
#include "support/runtime_config.hpp"

using namespace eddy::test::runtime_config;

namespace {

/// The Runtime constructor's error for `config`, or nullopt.
std::optional<std::string> construction_error(const RuntimeConfig& config) {
    CleanEnv clean;
    return invalid_argument_of([&] { Runtime rt(config); });
}

void check_field_rejected(const RuntimeConfig& config, const char* field, const std::string& accepted) {
    CAPTURE(field);
    const std::optional<std::string> message = construction_error(config);
    REQUIRE(message.has_value());
    CAPTURE(*message);
    CHECK(message->find(std::string("RuntimeConfig::") + field) != std::string::npos);
    CHECK(message->find(accepted) != std::string::npos);
}

}  // namespace

TEST_SUITE("runtime/config") {

// ---------------------------------------------------------------------------------------------
// Validation of the fields by the Runtime constructor

TEST_CASE("the Runtime constructor rejects every bad field, naming it and its range") {
    check_field_rejected(RuntimeConfig{.workers = 0}, "workers", "from 1 to 1024");
    check_field_rejected(RuntimeConfig{.workers = 1025}, "workers", "from 1 to 1024");
    check_field_rejected(RuntimeConfig{.workers = 1, .ring_entries = 0}, "ring_entries", "from 1 to 32768");
    check_field_rejected(RuntimeConfig{.workers = 1, .ring_entries = 32769}, "ring_entries", "from 1 to 32768");
    check_field_rejected(RuntimeConfig{.workers = 1, .thread_name_prefix = ""}, "thread_name_prefix", "non-empty");
    check_field_rejected(RuntimeConfig{.workers = 1, .thread_name_prefix = std::string("a\0b", 3)},
                         "thread_name_prefix", "non-empty");
    check_field_rejected(RuntimeConfig{.workers = 1, .global_queue_interval = 0}, "global_queue_interval",
                         "from 1 to 1000000");
    check_field_rejected(RuntimeConfig{.workers = 1, .global_queue_interval = 1000001}, "global_queue_interval",
                         "from 1 to 1000000");
    for (std::size_t bad : {std::size_t{1}, std::size_t{65535}, (std::size_t{1} << 30) + 1, ~std::size_t{0}}) {
        CAPTURE(bad);
        check_field_rejected(RuntimeConfig{.workers = 1, .stack_size = bad}, "stack_size", "64K to 1G");
    }
    check_field_rejected(RuntimeConfig{.workers = 1, .unhandled_exception = UnhandledExceptionPolicy::callback},
                         "unhandled_exception", "on_unhandled_exception");
    check_field_rejected(RuntimeConfig{.workers = 1, .unhandled_exception = static_cast<UnhandledExceptionPolicy>(42)},
                         "unhandled_exception", "log, ignore, terminate or callback");
}

TEST_CASE("the ends of every range are accepted") {
    CleanEnv clean;
    for (std::uint32_t interval : {1u, 1000000u}) {
        Runtime rt(RuntimeConfig{.workers = 1, .global_queue_interval = interval});
        CHECK(rt.block_on([]() -> eddy::Task<int> { co_return 5; }()) == 5);
    }
    for (std::size_t size : {RuntimeConfig::kMinStackSize, RuntimeConfig::kMaxStackSize}) {
        Runtime rt(RuntimeConfig{.workers = 1, .stack_size = size});
        CHECK(rt.block_on([]() -> eddy::Task<int> { co_return 6; }()) == 6);
    }
}

}  // TEST_SUITE("runtime/config")
