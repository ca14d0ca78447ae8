//! eddy/time/interval.hpp: eddy::Interval, a periodic timer on std::chrono::steady_clock
//! (Tokio's tokio::time::Interval); on the runtime's virtual clock under ClockMode::paused or
//! manual (eddy/runtime/time.hpp), where `interval`, `reset` and late ticks read it too.
//!
//!     eddy::Interval every = eddy::interval(100ms);          // the first tick completes at once
//!     for (;;) {
//!         auto at = co_await every.tick();                   // the tick's scheduled time point
//!         co_await poll_something();
//!     }
//!     auto hourly = eddy::interval_at(start, 1h);            // the first tick at `start`
//!     co_await hourly.tick(stop_source.get_token());        // cancellable
//!
//! Semantics:
//!   * The ticks are scheduled at start, start + period, start + 2 * period, ... (`interval`:
//!     start is now). `co_await tick()` suspends until the next scheduled tick is due and
//!     returns that tick's scheduled time point (not the time it was taken). A tick is a
//!     `sleep_until` of its time point (eddy/time/sleep.hpp): never early, and one already due
//!     completes without suspending (spending a unit of the cooperative budget, like a sleep).
//!   * A tick is late when the consumer takes it at or after the time point of the tick after
//!     it: at least one tick was missed. What follows a late tick is the MissedTick policy
//!     (`set_missed_tick`; burst by default, as Tokio):
//!       burst: the missed ticks complete back to back, without suspending, until the consumer
//!              has caught up; the schedule stays start + k * period.
//!       delay: the next tick is one period after the late tick was taken (now + period): the
//!              schedule starts again from there, and no two ticks are closer than a period.
//!       skip:  the missed ticks are dropped; the next tick is the first time point of the
//!              schedule (the late tick's time point + k * period) after now.
//!     A tick taken in time is followed by its time point + period under every policy. (Tokio
//!     counts a tick as late once it is 5 ms past its time point, so that its delay policy
//!     moves the schedule for a slow wake-up as well; eddy only when a tick was missed.)
//!   * `reset()`: the next tick is one period from now (whatever was due is dropped).
//!   * A period is rounded up to the clock's nanoseconds; one beyond the clock's range means
//!     that no tick after the first comes.
//!
//! Who may call what: `interval`, `interval_at`, `period` and `missed_tick` anywhere. A tick
//! that has to suspend needs a runtime worker (eddy::WrongThread otherwise; one already due
//! completes anywhere), like a sleep. An Interval is used by one task at a time (Tokio takes
//! it by `&mut`): `tick`, `reset` and `set_missed_tick` while a tick of the same Interval is
//! pending (awaited by another task, or an awaiter not yet destroyed) throw std::logic_error.
//! Do not move or destroy an Interval while a tick of it is pending.
//!
//! Cancellation (eddy/tasks/cancellation.hpp): a tick is cancelled like a sleep, through the
//! token passed to `tick` or the awaiting task's cancellation, and throws
//! eddy::OperationCancelled. A tick that fired before the cancel took effect returns its time
//! point; a cancelled tick takes nothing off the schedule: the next `tick()` waits for the
//! same time point. Awaiting with an already stopped token (its own or the task's) throws at
//! once, even when the tick is due (a burst loop in a cancelled task stops at its next tick).
//!
//! Errors: a period <= 0 (or NaN) throws std::invalid_argument from `interval`/`interval_at`.
//! @file
#pragma once

#include <atomic>
#include <cassert>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <stdexcept>
#include <stop_token>
#include <utility>

#include <eddy/time/sleep.hpp>
#include <eddy/tasks/detail/promise.hpp>

namespace eddy {

/// What a late tick (one taken after the next tick was due) does to the schedule; see the
/// file comment. Tokio's MissedTickBehavior.
enum class MissedTick : std::uint8_t {
    burst,  // the missed ticks complete back to back until caught up (the default)
    delay,  // the next tick is one period after the late tick was taken
    skip,   // the next tick is the first time point of the schedule after now
};

class Interval;

namespace detail {

/// Marks an Interval as having a tick pending for the life of its TickAwaiter.
class IntervalClaim {
public:
    /// std::logic_error naming `what` when the Interval is claimed already.
    IntervalClaim(Interval& interval, const char* what);
    /// The claim goes along; the moved-from one releases nothing.
    IntervalClaim(IntervalClaim&& o) noexcept : interval_(std::exchange(o.interval_, nullptr)) {}
    IntervalClaim(const IntervalClaim&) = delete;
    IntervalClaim& operator=(const IntervalClaim&) = delete;
    ~IntervalClaim();

    Interval& interval() const noexcept { return *interval_; }

private:
    Interval* interval_;
};

/// `co_await interval.tick()`: a sleep until the next tick's time point, then the schedule
/// moves on. The claim is declared first so that it is released last, after the sleep has
/// left its timer queue and dropped its stop callbacks.
class TickAwaiter {
public:
    /// Points into the caller's Interval: awaited in place, never spawned
    /// (eddy/tasks/awaitable.hpp).
    using borrows_operands = void;
    TickAwaiter(Interval& interval, std::stop_token token);
    /// Movable until first awaited (the sleep asserts it): the claim and the sleep go along.
    TickAwaiter(TickAwaiter&& o) noexcept : claim_(std::move(o.claim_)), sleep_(std::move(o.sleep_)) {
        assert(!o.cancelled_ && "eddy: an interval tick moved after it was awaited");
    }
    TickAwaiter(const TickAwaiter&) = delete;
    TickAwaiter& operator=(const TickAwaiter&) = delete;

    bool await_ready() noexcept { return sleep_.await_ready(); }
    /// Under a task whose cancellation is stopped, a tick throws at once even when it is due
    /// (as the synchronization primitives; a due sleep would complete).
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) {
        if (stop_requested(cancellation_of(h))) {
            cancelled_ = true;
            return false;
        }
        return sleep_.await_suspend(h);  // true: the last touch of this awaiter until resumed
    }
    /// The tick's scheduled time point; OperationCancelled (schedule untouched) when cancelled.
    std::chrono::steady_clock::time_point await_resume();

private:
    IntervalClaim claim_;
    SleepAwaiter sleep_;
    bool cancelled_ = false;
};

}  // namespace detail

/// A periodic timer: `co_await tick()` returns at start, start + period, ... (see the
/// file comment for late ticks and the virtual clock). Move-only.
class Interval {
public:
    using Clock = std::chrono::steady_clock;  ///< also under a virtual clock, whose time points it shares

    /// Ticks at start, start + period, ...; std::invalid_argument when period <= 0.
    Interval(Clock::time_point start, Clock::duration period);
    /// Takes the schedule and policy (never a pending tick: see the file comment).
    Interval(Interval&& other) noexcept;
    /// Takes `other`'s schedule and policy, as the move constructor does.
    Interval& operator=(Interval&& other) noexcept;
    Interval(const Interval&) = delete;
    Interval& operator=(const Interval&) = delete;
    ~Interval() = default;

    /// Suspends until the next tick is due; returns its scheduled time point.
    /// eddy::OperationCancelled (the schedule untouched) when cancelled.
    [[nodiscard]] detail::TickAwaiter tick(std::stop_token token = {}) {
        return detail::TickAwaiter(*this, std::move(token));
    }

    /// The next tick is one period from now.
    void reset();
    /// What late ticks do from now on (burst by default).
    void set_missed_tick(MissedTick policy);
    MissedTick missed_tick() const noexcept { return missed_; }  ///< the policy set now
    Clock::duration period() const noexcept { return period_; }  ///< the time between two scheduled ticks

private:
    friend class detail::IntervalClaim;
    friend class detail::TickAwaiter;

    /// Takes the tick due at next_, taken at `now`; moves next_ on by the policy.
    Clock::time_point take_tick(Clock::time_point now) noexcept;

    Clock::time_point next_;  // the next tick's time point (guarded by the claim)
    Clock::duration period_;
    MissedTick missed_ = MissedTick::burst;  // guarded by the claim
    // Whether a tick is pending (or reset/set_missed_tick runs). Claimed with an acquire
    // exchange (IntervalClaim), released with a release store by the claim's destructor:
    // the next claimer, on any thread, sees next_ and missed_ as the last one left them.
    std::atomic<bool> claimed_{false};
};

namespace detail {

/// The period in steady_clock ticks (rounded up, saturating); std::invalid_argument when
/// it is not positive.
template <class Rep, class Period>
std::chrono::steady_clock::duration interval_period(std::chrono::duration<Rep, Period> period) {
    if (!(period > std::chrono::duration<Rep, Period>::zero()))  // NaN too
        throw std::invalid_argument("eddy::interval: the period must be positive");
    return saturating_ceil(period);
}

}  // namespace detail

/// An Interval whose first tick is due at once; then one every `period`.
template <class Rep, class Period>
[[nodiscard]] Interval interval(std::chrono::duration<Rep, Period> period) {
    const auto p = detail::interval_period(period);
    return Interval(detail::clock_now(), p);
}

/// An Interval whose first tick is due at `start`; then one every `period`.
template <class Rep, class Period>
[[nodiscard]] Interval interval_at(std::chrono::steady_clock::time_point start,
                                   std::chrono::duration<Rep, Period> period) {
    return Interval(start, detail::interval_period(period));
}

}  // namespace eddy
