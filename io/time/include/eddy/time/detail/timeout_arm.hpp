// eddy/time/detail/timeout_arm.hpp: the timer and the cancellation scope that both forms of
// with_timeout run their operation under (eddy::Timeout for a Task, eddy::TimeoutOf for any
// other awaitable). Not for users: no stability promise.
//
// Protocol (TimeoutArm):
//   start    takes a scope from the thread's cache, links it under the awaiter's stop state
//            (cancelling the awaiter cancels the operation), derives it from the awaiter's
//            scope (task-locals, deadline, budget), reads the clock once and arms a kStop
//            timer on the worker's queue; with no time left it stops the scope at once.
//   settle   after the operation finished: unlinks the timer (true when it had fired, so a
//            cancellation of the operation was the timeout's) and the link to the awaiter.
//   release  gives the scope back. The operation's awaiter must be gone by then: it may
//            hold a callback registered on the scope.
//   abandon  the frame is destroyed while the operation waits (runtime shutdown).
#pragma once

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <limits>
#include <utility>

#include <eddy/time/detail/timer.hpp>
#include <eddy/runtime/detail/clock.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/detail/await_trace.hpp>

namespace eddy::detail {

/// A stop state and the cancellation a with_timeout's operation runs under. with_timeout
/// takes one from a per-thread cache and gives it back when the operation has finished, so
/// that a timeout allocates nothing in the steady state (io/time/timeout.cpp). Reference-counted:
/// the with_timeout holds one reference, and the reactor takes one for a timer that fires
/// (it stops the state after releasing its queue's lock, when the with_timeout may be gone).
struct TimeoutScope {
    TimeoutScope() noexcept : scope(&state) {}
    StopState state;
    TaskCancellation scope;
    // Acq_rel decrements: the last owner sees the others' writes before freeing.
    std::atomic<std::uint32_t> refs{1};
};
/// A fresh or recycled scope, holding one reference (std::bad_alloc when the cache is empty
/// and memory is out).
TimeoutScope* take_timeout_scope();
/// Drops the with_timeout's reference: back to this thread's cache if it was the last one
/// (made new again), else left to the reactor's.
void give_back_timeout_scope(TimeoutScope* s) noexcept;

/// `now_ns + d` in ns, saturated at the largest value.
inline std::int64_t add_saturated(std::int64_t now_ns, std::chrono::steady_clock::duration d) noexcept {
    const std::int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
    return ns > std::numeric_limits<std::int64_t>::max() - now_ns ? std::numeric_limits<std::int64_t>::max()
                                                                  : now_ns + ns;
}

/// A duration as steady_clock ticks: zero or negative gives zero (no time at all), huge
/// saturates, the rest rounds up (never early).
template <class Rep, class Period>
std::chrono::steady_clock::duration timeout_ticks(std::chrono::duration<Rep, Period> timeout) noexcept {
    using D = std::chrono::steady_clock::duration;
    using Wide = std::chrono::duration<long double, std::nano>;
    if (timeout <= std::chrono::duration<Rep, Period>::zero()) return D::zero();
    if (Wide(timeout) >= Wide(D::max())) return D::max();
    return std::chrono::ceil<D>(timeout);
}

/// When a with_timeout ends: at a time point, or a duration after it is awaited.
struct TimeoutSpec {
    std::int64_t deadline_ns = 0;                   // absolute (relative == false)
    std::chrono::steady_clock::duration timeout{};  // from the await (relative == true)
    bool relative = false;

    static TimeoutSpec at(std::chrono::steady_clock::time_point deadline) noexcept {
        return {std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count(), {}, false};
    }
    static TimeoutSpec after(std::chrono::steady_clock::duration d) noexcept { return {0, d, true}; }
};

/// See the protocol above. Movable until started.
class TimeoutArm {
public:
    explicit TimeoutArm(TimeoutSpec spec) noexcept : spec_(spec) {}
    TimeoutArm(TimeoutArm&& o) noexcept : spec_(o.spec_) {}
    TimeoutArm& operator=(TimeoutArm&&) = delete;
    ~TimeoutArm() { abandon(); }

    /// The scope the operation is to run under. Throws eddy::WrongThread off a worker,
    /// std::bad_alloc, before anything is set up.
    template <class P>
    const TaskCancellation* start(std::coroutine_handle<P> parent, const char* what) {
        entry_.queue = &current_timer_queue(what);
        scope_ = take_timeout_scope();
        parent_stop_ = cancellation_of(parent);
        // May stop the scope at once, if the awaiter is cancelled already.
        if (parent_stop_ != nullptr) link_.emplace(*parent_stop_, ForwardStop{&scope_->state});
        scope_->scope.inherit(cancellation_scope_of(parent));  // recycled: set each time
        const std::int64_t now = clock_now_ns();               // the one clock read (the runtime's)
        entry_.deadline_ns = spec_.relative ? add_saturated(now, spec_.timeout) : spec_.deadline_ns;
        entry_.action = TimerEntry::Action::kStop;
        entry_.timeout = scope_;
        if (entry_.deadline_ns <= now) {
            expired_ = true;  // no time at all: the operation starts cancelled
            scope_->state.request_stop();
        } else {
            (void)arm_timer(entry_);  // a kStop entry has no callbacks: always armed
        }
        return &scope_->scope;
    }

    /// The stop state of the scope start() returned (after start()).
    StopState& state() noexcept { return scope_->state; }

    /// True once start() ran, until release().
    bool active() const noexcept { return scope_ != nullptr; }

    /// The operation has finished: true when the timer fired (or there was no time), so that
    /// a cancellation it ended by was the timeout's unless the awaiter was stopped too.
    bool settle() noexcept {
        const bool fired = expired_ || !disarm_timer(entry_);
        link_.reset();  // waits for a forward running on another thread
        timed_out_ = fired && !stop_requested(parent_stop_);
        return fired;
    }
    /// After settle(): the timer fired and the awaiter was not cancelled itself.
    bool timed_out() const noexcept { return timed_out_; }

    /// Gives the scope back; nothing may be registered on it any more.
    void release() noexcept {
        if (scope_ != nullptr) give_back_timeout_scope(std::exchange(scope_, nullptr));
    }

    /// Unwinds a started arm whose operation is gone (a frame destroyed while it waited).
    void abandon() noexcept {
        if (scope_ == nullptr) return;
        link_.reset();
        if (entry_.state == TimerEntry::State::kQueued) disarm_timer(entry_);
        release();
    }

    /// Task dumps: "with_timeout, 80 ms left".
    void dump(DumpWait& d) const {
        d.text(expired_ ? "with_timeout, expired" : "with_timeout");
        if (!expired_) d.deadline(std::chrono::steady_clock::time_point(std::chrono::nanoseconds(entry_.deadline_ns)));
    }

private:
    TimeoutSpec spec_;
    bool expired_ = false;
    bool timed_out_ = false;
    TimerEntry entry_;
    TimeoutScope* scope_ = nullptr;
    StopState* parent_stop_ = nullptr;
    StopCallback<ForwardStop> link_;
};

/// What a TimeoutOf adds to its scope (nothing, for with_timeout): see eddy/time/race_sleep.hpp.
struct NoTimeoutExtra {
    void start(StopState&) noexcept {}
    void finish() noexcept {}
};

}  // namespace eddy::detail
