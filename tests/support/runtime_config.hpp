// tests/support/runtime_config.hpp: what the RuntimeConfig tests (tests/runtime/config_*_test.cpp)
// share: CleanEnv, which unsets every EDDY_* variable RuntimeConfig reads for one scope,
// invalid_argument_of, the message a rejected value throws, and threads_by_name, the names of
// this process's threads.
//
// The environment is changed only through CleanEnv/ScopedEnv (restored on the way out), on
// this thread, with no Runtime reading it concurrently (doctest runs cases one at a time).
// `using namespace eddy::test::runtime_config;` brings in the names the tests use.
#pragma once

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

namespace eddy::test::runtime_config {

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::UnhandledExceptionPolicy;

using eddy::test::ScopedEnv;
using eddy::test::StderrCapture;

inline constexpr const char* kAllVariables[] = {"EDDY_WORKERS",     "EDDY_RING_ENTRIES",          "EDDY_THREAD_NAME",
                                                "EDDY_PIN_WORKERS", "EDDY_GLOBAL_QUEUE_INTERVAL", "EDDY_STACK_SIZE",
                                                "EDDY_UNHANDLED",   "EDDY_SLOW_POLL_MS"};

/// Unsets every EDDY_* variable RuntimeConfig reads, for one scope.
class CleanEnv {
public:
    CleanEnv() {
        for (const char* v : kAllVariables) vars_.push_back(std::make_unique<ScopedEnv>(v, nullptr));
    }

private:
    std::vector<std::unique_ptr<ScopedEnv>> vars_;
};

/// The message of the std::invalid_argument `f()` throws, or nullopt if it throws nothing.
template <class F>
std::optional<std::string> invalid_argument_of(F f) {
    try {
        f();
    } catch (const std::invalid_argument& e) {
        return std::string(e.what());
    }
    return std::nullopt;
}

inline std::string read_line(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

/// name -> thread ids, for every thread of this process (/proc/self/task/*/comm).
inline std::multimap<std::string, pid_t> threads_by_name() {
    std::multimap<std::string, pid_t> out;
    DIR* dir = opendir("/proc/self/task");
    REQUIRE(dir != nullptr);
    while (dirent* d = readdir(dir)) {
        if (d->d_name[0] == '.') continue;
        const std::string tid = d->d_name;
        out.emplace(read_line("/proc/self/task/" + tid + "/comm"), static_cast<pid_t>(std::stol(tid)));
    }
    closedir(dir);
    return out;
}

}  // namespace eddy::test::runtime_config
