// eddy/time/detail/deadline.hpp: the deadline an I/O operation carries (eddy::with_deadline,
// eddy/time/with_deadline.hpp), as the awaiters see it. Not for users: no stability promise.
//
// A deadline is steady_clock nanoseconds since its epoch, held by the task's scope
// (TaskCancellation::deadline_ns; kNoDeadline: none). steady_clock is CLOCK_MONOTONIC, the
// clock the kernel reads an IORING_TIMEOUT_ABS link timeout against, so the number goes to
// the kernel as it is (io/reactor/link_timeout.cpp).
//
// "Now" for deadlines is read in one place, deadline_now_ns(): with_deadline(duration) adds
// to it, and an operation whose deadline has passed when it would be submitted fails at once
// with kDeadlineResult instead of going to the reactor.
#pragma once

#include <cerrno>
#include <chrono>
#include <cstdint>

#include <eddy/runtime/detail/clock.hpp>
#include <eddy/tasks/detail/task_cancellation.hpp>

namespace eddy::detail {

inline constexpr std::int64_t kNoDeadline = TaskCancellation::kNoDeadline;

/// An operation's result once its deadline passed (its awaiter throws eddy::TimedOut):
/// -ETIME, which no I/O call that eddy submits returns by itself.
inline constexpr std::int32_t kDeadlineResult = -ETIME;

/// Now, on the clock deadlines are measured with: steady_clock ns since its epoch, the
/// runtime's clock on a worker (virtual under a paused clock, eddy/runtime/time.hpp; then no
/// operation carries its deadline to the kernel: see io_deadline_of).
inline std::int64_t deadline_now_ns() noexcept { return clock_now_ns(); }

/// The deadline of the task whose scope is `s` (kNoDeadline: none).
inline std::int64_t deadline_of(const TaskCancellation* s) noexcept {
    return s != nullptr ? s->deadline_ns : kNoDeadline;
}

/// The deadline an I/O operation of the task whose scope is `s` carries into the kernel:
/// deadline_of(s), except under a virtual clock, which the kernel's timeouts cannot follow
/// (with_deadline stops the task with a timer on that clock instead: with_deadline.hpp).
inline std::int64_t io_deadline_of(const TaskCancellation* s) noexcept {
    const std::int64_t d = deadline_of(s);
    if (d != kNoDeadline && g_virtual_clocks.load(std::memory_order_relaxed) != 0 && clock_is_virtual()) [[unlikely]]
        return kNoDeadline;
    return d;
}

/// True when `deadline_ns` (not kNoDeadline) has passed: the operation must not start.
inline bool deadline_passed(std::int64_t deadline_ns) noexcept { return deadline_ns <= deadline_now_ns(); }

}  // namespace eddy::detail
