//! eddy/time/sleep.hpp: eddy::sleep and eddy::sleep_until, on std::chrono::steady_clock (the
//! runtime's virtual clock under ClockMode::paused or manual: eddy/runtime/time.hpp).
//!
//!     co_await eddy::sleep(100ms);
//!     co_await eddy::sleep_until(deadline);
//!     co_await eddy::sleep(1s, stop_source.get_token());   // cancellable
//!
//! A timer never fires early: the task resumes at or after the deadline. A deadline already
//! reached (zero or negative duration) completes without suspending. A sleep is queued on the
//! calling worker's timer queue (eddy/time/detail/timer.hpp); the reactor thread sleeps in the
//! kernel until the earliest deadline of all queues and resumes what is due: a sleep costs no
//! system call of its own, and one cancelled before it fires costs no trip to the reactor.
//! Cancelled through its stop_token or the task's cancellation, the sleep throws
//! eddy::OperationCancelled (a std::system_error with std::errc::operation_canceled). A sleep
//! that has to suspend throws eddy::WrongThread off a worker thread (one already due completes
//! anywhere).
//! @file
#pragma once

#include <cassert>
#include <cerrno>
#include <chrono>
#include <coroutine>
#include <optional>
#include <stop_token>

#include <eddy/io/detail/operation.hpp>
#include <eddy/time/detail/timer.hpp>
#include <eddy/runtime/detail/clock.hpp>
#include <eddy/runtime/detail/coop_budget.hpp>
#include <eddy/tasks/detail/promise.hpp>

namespace eddy {

namespace detail {

/// A positive `duration` in steady_clock ticks, rounded up (never early), saturating at
/// duration::max() instead of overflowing (hours::max(), 1e30 seconds). Compared in long
/// double nanoseconds: casting the limit to a narrow Rep (int microseconds) would wrap, and a
/// fine Period (picoseconds) would overflow.
template <class Rep, class Period>
std::chrono::steady_clock::duration saturating_ceil(std::chrono::duration<Rep, Period> duration) noexcept {
    using Wide = std::chrono::duration<long double, std::nano>;
    constexpr auto kMax = std::chrono::steady_clock::duration::max();
    if (Wide(duration) >= Wide(kMax)) return kMax;
    return std::chrono::ceil<std::chrono::steady_clock::duration>(duration);
}

/// `t + d` for d >= 0, saturating at time_point::max() ("never").
inline std::chrono::steady_clock::time_point saturating_add(std::chrono::steady_clock::time_point t,
                                                            std::chrono::steady_clock::duration d) noexcept {
    constexpr auto kMax = std::chrono::steady_clock::time_point::max();
    return t >= kMax - d ? kMax : t + d;  // kMax - d cannot overflow (d >= 0)
}

class SleepAwaiter {
public:
    /// `what` names the operation in its errors (eddy::Interval's ticks are sleeps too).
    SleepAwaiter(std::chrono::steady_clock::time_point deadline, std::stop_token token,
                 const char* what = "eddy::sleep") noexcept
        : token_(std::move(token)), what_(what) {
        entry_.deadline_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
    }
    /// Movable until first awaited, like a Rust future before its first poll: the deadline
    /// and the token go along; `o` was never armed, so its destructor does nothing.
    SleepAwaiter(SleepAwaiter&& o) noexcept : token_(std::move(o.token_)), what_(o.what_) {
        assert(o.entry_.state == TimerEntry::State::kIdle && !o.entry_.waiter && o.entry_.result == 0 &&
               "eddy: a sleep moved after it was awaited");
        entry_.deadline_ns = o.entry_.deadline_ns;
    }
    SleepAwaiter(const SleepAwaiter&) = delete;
    SleepAwaiter& operator=(const SleepAwaiter&) = delete;
    ~SleepAwaiter() {
        // The callbacks first (their destructors wait for a cancel running elsewhere); then
        // the entry leaves its queue if a frame is destroyed while it sleeps (shutdown).
        own_cancel_.reset();
        task_cancel_.reset();
        if (entry_.state == TimerEntry::State::kQueued) disarm_timer(entry_);
    }

    /// Task dumps: "eddy::sleep, 118 ms left".
    void dump_wait(detail::DumpWait& d) const {
        d.text(what_);
        d.deadline(std::chrono::steady_clock::time_point(std::chrono::nanoseconds(entry_.deadline_ns)));
    }

    /// Ready (no suspension) when the call's token is stopped already (then ECANCELED).
    bool await_ready() noexcept {
        if (token_.stop_requested()) {
            entry_.result = -ECANCELED;
            return true;
        }
        return false;
    }

    /// Does not suspend when the deadline has passed (that spends a unit of the cooperative
    /// budget, eddy/runtime/coop.hpp, and may yield), nor (ECANCELED) when the task's
    /// cancellation is stopped already.
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) {
        if (entry_.deadline_ns <= clock_now_ns()) return coop_yield(h);
        StopState* task = detail::cancellation_of(h);
        if (stop_requested(task)) {
            entry_.result = -ECANCELED;
            return false;
        }
        entry_.queue = &current_timer_queue(what_);
        entry_.waiter = h;
        // Registered before arming: a cancel either finds the entry queued (and resumes us)
        // or marks it so that arming fails (timer.hpp).
        if (token_.stop_possible()) own_cancel_.emplace(token_, CancelTimer{&entry_});
        if (task != nullptr) task_cancel_.emplace(*task, CancelTimer{&entry_});
        return arm_timer(entry_);  // true: the last touch (see timer.hpp)
    }

    void await_resume() const {
        if (entry_.result < 0) throw_io_error(entry_.result, what_);
    }

    /// When it ends (ns since steady_clock's epoch) and the token that can end it early: what
    /// when_any(op, sleep) reads to race the two without a frame (eddy/time/race_sleep.hpp).
    std::int64_t deadline_ns() const noexcept { return entry_.deadline_ns; }
    const std::stop_token& token() const noexcept { return token_; }

private:
    TimerEntry entry_;
    std::stop_token token_;
    const char* what_;
    std::optional<std::stop_callback<CancelTimer>> own_cancel_;
    StopCallback<CancelTimer> task_cancel_;
};

}  // namespace detail

/// Suspends the calling task until `deadline` (steady clock).
[[nodiscard]] inline detail::SleepAwaiter sleep_until(std::chrono::steady_clock::time_point deadline,
                                                      std::stop_token token = {}) noexcept {
    return detail::SleepAwaiter(deadline, std::move(token));
}

/// Suspends the calling task for at least `duration`.
template <class Rep, class Period>
[[nodiscard]] detail::SleepAwaiter sleep(std::chrono::duration<Rep, Period> duration,
                                         std::stop_token token = {}) noexcept {
    const auto now = detail::clock_now();
    // Due at once, without converting (hours::min() would overflow in the conversion).
    if (duration <= std::chrono::duration<Rep, Period>::zero()) return detail::SleepAwaiter(now, std::move(token));
    return detail::SleepAwaiter(detail::saturating_add(now, detail::saturating_ceil(duration)), std::move(token));
}

}  // namespace eddy
