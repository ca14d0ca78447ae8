// tests/support/watchdog.hpp: ends a stress test that hangs, instead of letting CI time out.
//
// A Watchdog lives for one round. Destroyed within `limit`, it does nothing; otherwise it
// prints "<program>: HANG: <what> ..." (plus the round's status, when given) and ends the
// process. EDDY_STRESS_HANG_PAUSE=1 makes it wait for a debugger instead of exiting.
#pragma once

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace eddy::test {

class Watchdog {
public:
    Watchdog(const char* program, std::string what, std::chrono::seconds limit,
             std::function<std::string()> status = {})
        : program_(program), what_(std::move(what)), limit_(limit), status_(std::move(status)),
          thread_([this] { watch(); }) {}
    ~Watchdog() {
        {
            std::lock_guard lock(mutex_);
            disarmed_ = true;
            cv_.notify_all();
        }
        thread_.join();
    }
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;

private:
    void watch() {
        std::unique_lock lock(mutex_);
        if (cv_.wait_for(lock, limit_, [&] { return disarmed_; })) return;
        std::fprintf(stderr, "%s: HANG: %s did not finish within %lld s\n", program_, what_.c_str(),
                     static_cast<long long>(limit_.count()));
        if (status_) std::fprintf(stderr, "  %s\n", status_().c_str());
        std::fflush(stderr);
        if (const char* p = std::getenv("EDDY_STRESS_HANG_PAUSE"); p != nullptr && *p == '1') {
            std::fprintf(stderr, "%s: pid %d paused for a debugger (gdb -p %d)\n", program_,
                         static_cast<int>(::getpid()), static_cast<int>(::getpid()));
            std::fflush(stderr);
            for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
        }
        // _Exit, not abort: no signal handler (doctest's, TSan's) runs on a hung process.
        std::_Exit(EXIT_FAILURE);
    }

    const char* program_;
    std::string what_;
    std::chrono::seconds limit_;
    std::function<std::string()> status_;
    std::mutex mutex_;
    std::condition_variable cv_;
    bool disarmed_ = false;  // guarded by mutex_
    std::thread thread_;     // last: starts once the fields above exist
};

}  // namespace eddy::test
