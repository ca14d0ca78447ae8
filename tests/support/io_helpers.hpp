// tests/support/io_helpers.hpp: small helpers shared by the tests that drive the reactor
// (tests/reactor/, tests/time/, tests/runtime/task_dump_test.cpp, tests/stress/).
//
// Reading and writing a whole buffer through the reactor, classifying how an awaited
// operation ended, polling an atomic counter with a deadline, and checking from the test
// thread whether a descriptor has bytes waiting.
#pragma once

#include <poll.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>

#include <eddy/io/read_write.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/waiting.hpp"

namespace eddy::test {

/// Polls until `n` reaches at least `target` or kDeadline passes; true if it did.
inline bool wait_count(const std::atomic<int>& n, int target) {
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (n.load() < target) {
        if (past(deadline)) return false;
        std::this_thread::yield();
    }
    return true;
}

/// Writes all of `data` to `fd` through the reactor (io::write may be short).
inline Task<void> write_all(int fd, std::span<const std::byte> data) {
    while (!data.empty()) {
        const std::size_t n = co_await io::write(fd, data);
        if (n == 0) throw std::runtime_error("write_all: write returned 0");
        data = data.subspan(n);
    }
}

/// Fills `buf` from `fd` through the reactor; returns the bytes read (short only at EOF).
inline Task<std::size_t> read_exact(int fd, std::span<std::byte> buf) {
    std::size_t got = 0;
    while (got < buf.size()) {
        const std::size_t n = co_await io::read(fd, buf.subspan(got));
        if (n == 0) break;
        got += n;
    }
    co_return got;
}

/// True if `fd` has something to read right now (poll with a zero timeout).
inline bool readable_now(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

/// How an awaited operation ended.
enum class Outcome { value, canceled, other_system_error, runtime_stopped, other_exception };

/// Awaits `t` and classifies the result; the value (if any) goes to `*value`.
template <class T>
Task<Outcome> outcome_of(Task<T> t, T* value = nullptr) {
    try {
        T v = co_await std::move(t);
        if (value != nullptr) *value = std::move(v);
    } catch (const std::system_error& e) {
        co_return e.code() == std::errc::operation_canceled ? Outcome::canceled : Outcome::other_system_error;
    } catch (const RuntimeStopped&) {
        co_return Outcome::runtime_stopped;
    } catch (...) {
        co_return Outcome::other_exception;
    }
    co_return Outcome::value;
}

inline Task<Outcome> outcome_of(Task<void> t) {
    try {
        co_await std::move(t);
    } catch (const std::system_error& e) {
        co_return e.code() == std::errc::operation_canceled ? Outcome::canceled : Outcome::other_system_error;
    } catch (const RuntimeStopped&) {
        co_return Outcome::runtime_stopped;
    } catch (...) {
        co_return Outcome::other_exception;
    }
    co_return Outcome::value;
}

/// Awaits a JoinHandle and classifies how its task ended.
template <class T>
Task<Outcome> join_outcome(JoinHandle<T> h) {
    try {
        (void)co_await std::move(h);
    } catch (const std::system_error& e) {
        co_return e.code() == std::errc::operation_canceled ? Outcome::canceled : Outcome::other_system_error;
    } catch (const RuntimeStopped&) {
        co_return Outcome::runtime_stopped;
    } catch (...) {
        co_return Outcome::other_exception;
    }
    co_return Outcome::value;
}

/// Raises the soft RLIMIT_NOFILE towards `wanted` (never above the hard limit); returns the
/// soft limit in force afterwards, so a test can size itself to it.
inline std::size_t raise_fd_limit(std::size_t wanted) {
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < wanted) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? wanted : std::min<rlim_t>(wanted, rl.rlim_max);
        (void)::setrlimit(RLIMIT_NOFILE, &rl);
        (void)::getrlimit(RLIMIT_NOFILE, &rl);
    }
    return rl.rlim_cur == RLIM_INFINITY ? wanted : static_cast<std::size_t>(rl.rlim_cur);
}

inline std::span<const std::byte> bytes_of(const char* s, std::size_t n) {
    return {reinterpret_cast<const std::byte*>(s), n};
}

}  // namespace eddy::test
