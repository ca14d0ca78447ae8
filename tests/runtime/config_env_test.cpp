// tests/runtime/config_env_test.cpp: RuntimeConfig::from_env() (eddy/runtime/config.hpp)
// reads and validates every EDDY_* variable: each bad value is rejected with the variable, the
// value and the range; the good ones are read, over a base config or under values set after;
// a plain Runtime reads none of them.
//
// The environment is changed only through CleanEnv/ScopedEnv (tests/support/runtime_config.hpp).
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

/// from_env()'s error with `var` set to `value`, or nullopt.
std::optional<std::string> env_error(const char* var, const char* value) {
    CleanEnv clean;
    ScopedEnv env(var, value);
    return invalid_argument_of([] { (void)RuntimeConfig::from_env(); });
}

/// from_env() with `var` set to `value` (and nothing else set).
RuntimeConfig from_env_with(const char* var, const char* value) {
    CleanEnv clean;
    ScopedEnv env(var, value);
    return RuntimeConfig::from_env();
}

/// Checks that every value in `bad` is rejected with a message naming `var`, quoting the
/// value and containing `accepted` (the range).
void check_rejected(const char* var, std::initializer_list<const char*> bad, const std::string& accepted) {
    for (const char* value : bad) {
        CAPTURE(var);
        CAPTURE(value);
        const std::optional<std::string> message = env_error(var, value);
        REQUIRE(message.has_value());
        CAPTURE(*message);
        CHECK(message->find(var) != std::string::npos);
        std::string quoted(1, '\'');  // (not "'" + std::string: g++ 12's -Wrestrict false positive)
        quoted.append(value).push_back('\'');
        CHECK(message->find(quoted) != std::string::npos);
        CHECK(message->find(accepted) != std::string::npos);
    }
}

}  // namespace

TEST_SUITE("runtime/config") {

// ---------------------------------------------------------------------------------------------
// from_env: bad values

TEST_CASE("EDDY_WORKERS: every bad value is rejected, naming the variable, the value and the range") {
    check_rejected("EDDY_WORKERS",
                   {"", "0", "-1", "abc", "1025", " 4", "4 ", "+4", "4x", "1.5", "99999999999999999999999"},
                   "from 1 to 1024");
}

TEST_CASE("EDDY_RING_ENTRIES: every bad value is rejected") {
    check_rejected("EDDY_RING_ENTRIES", {"", "0", "-1", "x", "32769", "1k", "4096 ", "99999999999999999999999"},
                   "from 1 to 32768");
}

TEST_CASE("EDDY_THREAD_NAME: empty is rejected") { check_rejected("EDDY_THREAD_NAME", {""}, "non-empty"); }

TEST_CASE("EDDY_PIN_WORKERS: every bad value is rejected") {
    check_rejected("EDDY_PIN_WORKERS", {"", "2", "-1", "yes", "no", "on", "truee", " 1", "1 ", "01"},
                   "0, 1, true or false");
}

TEST_CASE("EDDY_GLOBAL_QUEUE_INTERVAL: every bad value is rejected") {
    check_rejected("EDDY_GLOBAL_QUEUE_INTERVAL",
                   {"", "0", "-5", "ten", "1000001", "61x", "6.1", "99999999999999999999999"}, "from 1 to 1000000");
}

TEST_CASE("EDDY_STACK_SIZE: every bad value is rejected") {
    check_rejected("EDDY_STACK_SIZE",
                   {"",
                    "00",
                    "0K",
                    "-1",
                    "-64K",
                    "abc",
                    "1000",
                    "65535",
                    "63K",
                    "2G",
                    "1025M",
                    "1073741825",
                    "1T",
                    "64KB",
                    "64KiB",
                    "K",
                    "1.5M",
                    " 64K",
                    "64K ",
                    "99999999999999999999G",
                    "17179869184G"},
                   "from 65536 to 1073741824 bytes (64K to 1G)");
}

TEST_CASE("EDDY_UNHANDLED: every bad value is rejected") {
    check_rejected("EDDY_UNHANDLED", {"", "callback", "abort", "logs", " log", "log ", "0"},
                   "log, ignore or terminate");
}

// ---------------------------------------------------------------------------------------------
// from_env: good values

TEST_CASE("from_env with no variable set gives the defaults") {
    CleanEnv clean;
    const RuntimeConfig c = RuntimeConfig::from_env();
    CHECK_FALSE(c.workers.has_value());
    CHECK(c.ring_entries == 1024);
    CHECK(c.thread_name_prefix == "eddy");
    CHECK_FALSE(c.pin_workers);
    CHECK(c.global_queue_interval == 61);
    CHECK(c.stack_size == 0);
    CHECK_FALSE(c.unhandled_exception.has_value());
    CHECK_FALSE(c.on_thread_start);
    CHECK_FALSE(c.on_unhandled_exception);
}

TEST_CASE("from_env reads every variable") {
    CHECK(from_env_with("EDDY_WORKERS", "3").workers == std::optional<std::size_t>(3));
    CHECK(from_env_with("EDDY_WORKERS", "1024").workers == std::optional<std::size_t>(1024));
    CHECK(from_env_with("EDDY_RING_ENTRIES", "1").ring_entries == 1);
    CHECK(from_env_with("EDDY_RING_ENTRIES", "32768").ring_entries == 32768);
    CHECK(from_env_with("EDDY_THREAD_NAME", "svc").thread_name_prefix == "svc");
    for (const char* yes : {"1", "true", "TRUE", "True"}) CHECK(from_env_with("EDDY_PIN_WORKERS", yes).pin_workers);
    for (const char* no : {"0", "false", "FALSE"}) CHECK_FALSE(from_env_with("EDDY_PIN_WORKERS", no).pin_workers);
    CHECK(from_env_with("EDDY_GLOBAL_QUEUE_INTERVAL", "1").global_queue_interval == 1);
    CHECK(from_env_with("EDDY_GLOBAL_QUEUE_INTERVAL", "31").global_queue_interval == 31);
    CHECK(from_env_with("EDDY_GLOBAL_QUEUE_INTERVAL", "1000000").global_queue_interval == 1000000);
    CHECK(from_env_with("EDDY_STACK_SIZE", "0").stack_size == 0);  // the system's default, as for the field
    CHECK(from_env_with("EDDY_STACK_SIZE", "65536").stack_size == 65536);
    CHECK(from_env_with("EDDY_STACK_SIZE", "64K").stack_size == 65536);
    CHECK(from_env_with("EDDY_STACK_SIZE", "64k").stack_size == 65536);
    CHECK(from_env_with("EDDY_STACK_SIZE", "100000").stack_size == 100000);
    CHECK(from_env_with("EDDY_STACK_SIZE", "2M").stack_size == 2u << 20);
    CHECK(from_env_with("EDDY_STACK_SIZE", "512m").stack_size == 512u << 20);
    CHECK(from_env_with("EDDY_STACK_SIZE", "1G").stack_size == 1u << 30);
    CHECK(from_env_with("EDDY_STACK_SIZE", "1073741824").stack_size == 1u << 30);
    CHECK(from_env_with("EDDY_UNHANDLED", "log").unhandled_exception == UnhandledExceptionPolicy::log);
    CHECK(from_env_with("EDDY_UNHANDLED", "ignore").unhandled_exception == UnhandledExceptionPolicy::ignore);
    CHECK(from_env_with("EDDY_UNHANDLED", "IGNORE").unhandled_exception == UnhandledExceptionPolicy::ignore);
    CHECK(from_env_with("EDDY_UNHANDLED", "terminate").unhandled_exception == UnhandledExceptionPolicy::terminate);
}

TEST_CASE("from_env(base) keeps what no variable sets, and the variables win over base") {
    CleanEnv clean;
    ScopedEnv ring("EDDY_RING_ENTRIES", "64");
    ScopedEnv pin("EDDY_PIN_WORKERS", "true");
    int started = 0;
    const RuntimeConfig c = RuntimeConfig::from_env(RuntimeConfig{.workers = 2,
                                                                  .ring_entries = 8,
                                                                  .thread_name_prefix = "base",
                                                                  .global_queue_interval = 7,
                                                                  .on_thread_start = [&] { ++started; }});
    CHECK(c.workers == std::optional<std::size_t>(2));
    CHECK(c.ring_entries == 64);
    CHECK(c.pin_workers);
    CHECK(c.thread_name_prefix == "base");
    CHECK(c.global_queue_interval == 7);
    REQUIRE(c.on_thread_start);
    c.on_thread_start();
    CHECK(started == 1);
}

TEST_CASE("a Runtime built from from_env() uses the variables") {
    CleanEnv clean;
    ScopedEnv workers("EDDY_WORKERS", "2");
    ScopedEnv name("EDDY_THREAD_NAME", "envt");
    Runtime rt(RuntimeConfig::from_env());
    CHECK(rt.workers() == 2);
    const auto threads = threads_by_name();
    CHECK(threads.count("envt-worker-0") == 1);
    CHECK(threads.count("envt-worker-1") == 1);
    CHECK(threads.count("envt-reactor") == 1);
}

// The precedence rule (config.hpp): the program's values win; the environment counts only
// through from_env(base), where the variables that are set win over base.

TEST_CASE("a plain Runtime: its explicit values win, EDDY_WORKERS and the others are not read") {
    CleanEnv clean;
    ScopedEnv workers("EDDY_WORKERS", "3");
    ScopedEnv name("EDDY_THREAD_NAME", "ignored");
    Runtime rt(RuntimeConfig{.workers = 1, .thread_name_prefix = "plain"});
    CHECK(rt.workers() == 1);
    const auto threads = threads_by_name();
    CHECK(threads.count("plain-worker-0") == 1);
    CHECK(threads.count("plain-worker-1") == 0);
    CHECK(threads.count("ignored-reactor") == 0);
}

TEST_CASE("from_env(base) with EDDY_WORKERS set: the variable wins over base.workers") {
    CleanEnv clean;
    ScopedEnv workers("EDDY_WORKERS", "3");
    Runtime rt(RuntimeConfig::from_env(RuntimeConfig{.workers = 1}));
    CHECK(rt.workers() == 3);
}

TEST_CASE("a value set on from_env()'s result wins again (a command-line flag over the environment)") {
    CleanEnv clean;
    ScopedEnv workers("EDDY_WORKERS", "3");
    RuntimeConfig c = RuntimeConfig::from_env();
    REQUIRE(c.workers == std::optional<std::size_t>(3));
    c.workers = 2;
    Runtime rt(std::move(c));
    CHECK(rt.workers() == 2);
}

TEST_CASE("a default Runtime with EDDY_WORKERS set does not read it, not even to reject it") {
    CleanEnv clean;
    const std::size_t cpus = Runtime().workers();  // one per CPU this process may use
    for (const char* value : {"abc", "0", "1025", "1"}) {
        CAPTURE(value);
        ScopedEnv workers("EDDY_WORKERS", value);
        Runtime rt;  // no std::invalid_argument for the bad values: nothing reads them
        CHECK(rt.workers() == cpus);
    }
}

}  // TEST_SUITE("runtime/config")
