// tests/support/waiting.hpp: bounded waits shared by the runtime tests.
//
// A test never sleeps to synchronize; where it must wait for another thread it polls with a
// deadline so generous that missing it means a hang (a lost task), never slowness.
#pragma once

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <optional>
#include <thread>

#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/this_worker.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::test {

/// How long a bounded wait may take before the test calls it a failure (a hang, really).
inline constexpr auto kDeadline = std::chrono::seconds(20);

inline bool past(std::chrono::steady_clock::time_point deadline) { return std::chrono::steady_clock::now() > deadline; }

/// Polls is_finished() until it is true or kDeadline passes; true if it finished.
template <class T>
bool wait_finished(const JoinHandle<T>& h) {
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (!h.is_finished()) {
        if (past(deadline)) return false;
        std::this_thread::yield();
    }
    return true;
}

/// Increments `started`, then spins (without suspending) until `n` tasks have started, so `n`
/// such tasks can only all finish if they run at once on different workers. Returns the
/// worker it ran on, or nullopt if the others never came (the deadline passed).
inline Task<std::optional<std::size_t>> rendezvous(std::atomic<int>& started, int n) {
    started.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (started.load() < n)
        if (past(deadline)) co_return std::nullopt;
    co_return this_worker::index();
}

/// A bare eager coroutine, to co_await something on a thread that is not a worker (to check
/// that eddy refuses it). An escaping exception is a test bug: it terminates.
struct Eager {
    struct promise_type {
        Eager get_return_object() noexcept { return {}; }
        std::suspend_never initial_suspend() const noexcept { return {}; }
        std::suspend_never final_suspend() const noexcept { return {}; }
        void return_void() noexcept {}
        void unhandled_exception() noexcept { std::terminate(); }
    };
};

}  // namespace eddy::test
