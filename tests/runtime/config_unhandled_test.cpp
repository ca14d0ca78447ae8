// tests/runtime/config_unhandled_test.cpp: RuntimeConfig's unhandled-exception policies
// (eddy/runtime/config.hpp): log, ignore, callback and terminate, set directly or through
// EDDY_UNHANDLED, for a task whose handle is dropped unawaited.
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

struct Boom : std::runtime_error {
    using std::runtime_error::runtime_error;
};

eddy::Task<void> throw_after(std::latch& started, const char* what) {
    started.count_down();
    throw Boom(what);
    co_return;
}

/// Runs a task that throws on a runtime built from `config`, its JoinHandle dropped at once,
/// and shuts the runtime down once the task has run (so its report has happened).
void throw_detached(RuntimeConfig config, const char* what = "boom-detached") {
    Runtime rt(std::move(config));
    std::latch started(1);
    rt.spawn(throw_after(started, what)).detach();
    started.wait();
}  // shutdown joins the worker after the task's step, report included

/// Counts calls of an on_unhandled_exception hook.
struct Calls {
    std::atomic<int> n{0};
    std::function<void(std::exception_ptr)> hook() {
        return [this](std::exception_ptr) { n.fetch_add(1); };
    }
};

}  // namespace

TEST_SUITE("runtime/config") {

// ---------------------------------------------------------------------------------------------
// Unhandled-exception policies

TEST_CASE("policy log (the default without a callback) prints one line on stderr") {
    CleanEnv clean;
    for (std::optional<UnhandledExceptionPolicy> policy :
         {std::optional<UnhandledExceptionPolicy>(), std::optional(UnhandledExceptionPolicy::log)}) {
        StderrCapture capture;
        throw_detached(RuntimeConfig{.workers = 1, .unhandled_exception = policy});
        const std::string err = capture.finish();
        CHECK(err.find("exception escaped a detached task: boom-detached") != std::string::npos);
    }
}

TEST_CASE("policy log wins over a callback that is set") {
    CleanEnv clean;
    Calls calls;
    StderrCapture capture;
    throw_detached(RuntimeConfig{
        .workers = 1, .unhandled_exception = UnhandledExceptionPolicy::log, .on_unhandled_exception = calls.hook()});
    CHECK(capture.finish().find("boom-detached") != std::string::npos);
    CHECK(calls.n.load() == 0);
}

TEST_CASE("policy ignore prints nothing and calls nothing") {
    CleanEnv clean;
    Calls calls;
    StderrCapture capture;
    throw_detached(RuntimeConfig{
        .workers = 1, .unhandled_exception = UnhandledExceptionPolicy::ignore, .on_unhandled_exception = calls.hook()});
    CHECK(capture.finish().find("boom-detached") == std::string::npos);
    CHECK(calls.n.load() == 0);
}

TEST_CASE("EDDY_UNHANDLED=ignore through from_env silences the report") {
    CleanEnv clean;
    ScopedEnv policy("EDDY_UNHANDLED", "ignore");
    StderrCapture capture;
    RuntimeConfig config = RuntimeConfig::from_env({.workers = 1});
    throw_detached(std::move(config));
    CHECK(capture.finish().find("boom-detached") == std::string::npos);
}

TEST_CASE("policy callback, and a callback with the policy left unset, call on_unhandled_exception once") {
    CleanEnv clean;
    for (std::optional<UnhandledExceptionPolicy> policy :
         {std::optional<UnhandledExceptionPolicy>(), std::optional(UnhandledExceptionPolicy::callback)}) {
        Calls calls;
        StderrCapture capture;
        throw_detached(
            RuntimeConfig{.workers = 1, .unhandled_exception = policy, .on_unhandled_exception = calls.hook()});
        CHECK(calls.n.load() == 1);
        CHECK(capture.finish().find("boom-detached") == std::string::npos);
    }
}

TEST_CASE("the policy applies to a finished task whose handle is dropped unawaited") {
    CleanEnv clean;
    for (UnhandledExceptionPolicy policy : {UnhandledExceptionPolicy::callback, UnhandledExceptionPolicy::ignore}) {
        Calls calls;
        Runtime rt(RuntimeConfig{.workers = 1, .unhandled_exception = policy, .on_unhandled_exception = calls.hook()});
        std::latch started(1);
        {
            eddy::JoinHandle<void> h = rt.spawn(throw_after(started, "boom-unobserved"));
            while (!h.is_finished()) sched_yield();
        }  // dropped here, finished and never awaited
        CHECK(calls.n.load() == (policy == UnhandledExceptionPolicy::callback ? 1 : 0));
    }
}

TEST_CASE("policy terminate aborts the process (in a child)") {
    CleanEnv clean;
    std::FILE* err = std::tmpfile();
    REQUIRE(err != nullptr);
    std::fflush(nullptr);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        ::signal(SIGABRT, SIG_DFL);  // doctest's crash handler would report a failed test
        ::dup2(::fileno(err), 2);
        try {
            throw_detached(RuntimeConfig{.workers = 1, .unhandled_exception = UnhandledExceptionPolicy::terminate});
        } catch (...) {
            ::_exit(3);
        }
        ::_exit(0);  // not terminated: the test fails
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGABRT);
    std::string out;
    std::rewind(err);
    char buf[256];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, err)) > 0) out.append(buf, n);
    std::fclose(err);
    CHECK(out.find("boom-detached") != std::string::npos);
    CHECK(out.find("terminating") != std::string::npos);
}

}  // TEST_SUITE("runtime/config")
