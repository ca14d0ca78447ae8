// eddy/runtime/detail/clock.hpp: how eddy's timer code reads "now" (sleep, with_timeout,
// Interval, the reactor). Not for users: eddy/runtime/time.hpp is the public face.
//
// A runtime's clock is steady_clock (ClockMode::real) or a virtual one (paused, manual:
// runtime/clock.hpp). Timer code runs on workers, so "now" is the calling worker's runtime's
// clock; off a worker it is steady_clock. The check costs a real-clock program one relaxed
// load of a process-wide count that never changes while no virtual runtime exists (a
// predictable branch): only while one does is the worker's runtime looked up.
//
// For the I/O layer (deadline operations that must fall back to virtual timers):
// clock_is_virtual() and clock_now_ns() are the two questions to ask.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace eddy::detail {

/// Runtimes with a virtual clock alive in this process. Relaxed is enough: a thread that
/// needs a virtual clock runs on a worker of such a runtime, started after the Scheduler's
/// constructor counted it (thread creation orders the increment first); any other thread
/// reads steady_clock either way.
extern std::atomic<std::uint32_t> g_virtual_clocks;  // on a cache line of its own (clock.cpp)

/// steady_clock nanoseconds since its epoch.
inline std::int64_t steady_now_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

/// The calling worker's runtime's clock, steady_clock off a worker (runtime/clock.cpp).
std::int64_t runtime_now_ns() noexcept;

/// Whether the calling thread is a worker of a runtime whose clock is virtual.
bool clock_is_virtual() noexcept;

/// "Now" for timers, in steady_clock nanoseconds: the calling worker's runtime's clock.
inline std::int64_t clock_now_ns() noexcept {
    if (g_virtual_clocks.load(std::memory_order_relaxed) == 0) [[likely]]
        return steady_now_ns();
    return runtime_now_ns();
}

/// clock_now_ns() as a steady_clock time point.
inline std::chrono::steady_clock::time_point clock_now() noexcept {
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(clock_now_ns()));
}

}  // namespace eddy::detail
