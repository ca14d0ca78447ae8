// eddy/io/with_timeout.hpp: eddy::with_timeout, a task with a time limit (a duration or a time point).
//
//     std::string line = co_await eddy::with_timeout(read_line(conn), 5s);   // or TimedOut
//
// The task runs at once on the awaiting worker (like `co_await task`), under a cancellation
// of its own that is linked under the awaiter's, while a timer waits on that worker's timer
// queue (eddy/io/detail/timer.hpp). If the task finishes first, its value is returned (or its
// exception rethrown) and the timer is unlinked: no trip to the reactor, no allocation. If
// the time runs out first, the reactor stops the task's cancellation (whatever it awaits
// throws eddy::OperationCancelled, eddy/tasks/cancellation.hpp) and with_timeout waits until
// the task has stopped. Then:
//   * if it stopped by that cancellation, eddy::TimedOut is thrown (a std::system_error with
//     std::errc::timed_out);
//   * if it finished anyway (the cancel came too late: its read had completed, say), its
//     value is returned: a result is never thrown away, so no bytes a read consumed are lost;
//   * if it failed with another exception, that exception is rethrown.
// An exception rather than std::optional, so that `Task<std::optional<T>>` stays unambiguous
// and a timeout cannot be mistaken for a value. Cancelling the awaiter cancels both
// (OperationCancelled). Awaiting off a worker throws eddy::WrongThread; an empty task
// eddy::BrokenTask.
//
// with_timeout returns an eddy::Timeout<T>, an awaitable that costs nothing until awaited;
// awaiting it directly allocates nothing beyond what the task itself costs. It converts to
// Task<T> (one coroutine frame) where a Task is needed (spawn, when_all, TaskGroup::spawn,
// a variable of type Task<T>).
#pragma once

#include <chrono>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <stop_token>
#include <type_traits>
#include <utility>

#include <eddy/io/detail/timer.hpp>
#include <eddy/runtime/detail/children.hpp>
#include <eddy/runtime/detail/clock.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy {

namespace detail {

/// A stop state and the cancellation a with_timeout's task runs under. with_timeout takes
/// one from a per-thread cache and gives it back when the task has finished, so that a
/// timeout allocates nothing in the steady state (io/timeout.cpp). Reference-counted: the
/// with_timeout holds one reference, and the reactor takes one for a timer that fires (it
/// stops the state after releasing its queue's lock, when the with_timeout may be gone).
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

} // namespace detail

/// The awaitable that with_timeout returns. Move it until it is awaited;
/// await it once.
template <class T>
class [[nodiscard]] Timeout {
public:
    using Clock = std::chrono::steady_clock;

    Timeout(Task<T> task, Clock::time_point deadline) noexcept
        : task_(std::move(task)),
          deadline_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count()) {}
    Timeout(Task<T> task, Clock::duration timeout) noexcept
        : task_(std::move(task)), timeout_(timeout), relative_(true) {}
    Timeout(Timeout&& other) noexcept
        : task_(std::move(other.task_)),
          deadline_ns_(other.deadline_ns_),
          timeout_(other.timeout_),
          relative_(other.relative_) {}
    Timeout& operator=(Timeout&&) = delete;
    Timeout(const Timeout&) = delete;
    ~Timeout() {
        // Only a frame destroyed while the task ran (runtime shutdown) gets here with a scope:
        // the task's frame goes first, since it may still unregister callbacks on the scope.
        if (scope_ != nullptr) {
            link_.reset();
            if (entry_.state == detail::TimerEntry::State::kQueued) detail::disarm_timer(entry_);
            task_ = Task<T>{};
            detail::give_back_timeout_scope(std::exchange(scope_, nullptr));
        }
    }

    bool await_ready() const noexcept { return false; }

    /// Task dumps: "with_timeout, 80 ms left", the task under it.
    void dump_wait(detail::DumpWait& d) const {
        d.text(expired_ ? "with_timeout, expired" : "with_timeout");
        if (!expired_) d.deadline(std::chrono::steady_clock::time_point(std::chrono::nanoseconds(entry_.deadline_ns)));
        d.child(detail::TaskAccess::get(task_));
    }

    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> parent) {
        auto child = detail::TaskAccess::get(task_);
        if (!child) throw BrokenTask("eddy::with_timeout: the task is empty (moved-from or already awaited)");
        entry_.queue = &detail::current_timer_queue("eddy::with_timeout");
        scope_ = detail::take_timeout_scope();
        parent_stop_ = detail::cancellation_of(parent);
        // May stop the scope at once, if the awaiter is cancelled already.
        if (parent_stop_ != nullptr) link_.emplace(*parent_stop_, detail::ForwardStop{&scope_->state});
        scope_->scope.inherit(detail::cancellation_scope_of(parent));  // recycled: set each time
        child.promise().set_cancellation(&scope_->scope);
        child.promise().set_continuation(parent);
        const std::int64_t now = detail::clock_now_ns();  // the one clock read (the runtime's)
        entry_.deadline_ns = relative_ ? detail::add_saturated(now, timeout_) : deadline_ns_;
        entry_.action = detail::TimerEntry::Action::kStop;
        entry_.timeout = scope_;
        if (entry_.deadline_ns <= now) {
            expired_ = true;  // no time at all: the task starts cancelled
            scope_->state.request_stop();
        } else {
            (void)detail::arm_timer(entry_);  // a kStop entry has no callbacks: always armed
        }
        return child;  // symmetric transfer: the task runs now
    }

    T await_resume() {
        // The timer: unlinked (it will never fire) or it fired (the reactor stopped the scope).
        const bool fired = expired_ || !detail::disarm_timer(entry_);
        link_.reset();  // waits for a forward running on another thread
        auto child = detail::TaskAccess::get(task_);
        std::exception_ptr failure = child.promise().exception();
        const bool timed_out =
            fired && failure && detail::is_cancellation(failure) && !detail::stop_requested(parent_stop_);
        struct Release {  // the task's frame first, then the scope it ran under
            Timeout& self;
            ~Release() {
                self.task_ = Task<T>{};
                detail::give_back_timeout_scope(std::exchange(self.scope_, nullptr));
            }
        } release{*this};
        if (timed_out) throw TimedOut();
        // A cancellation of the awaiter: OperationCancelled, not TimedOut, so that a TaskGroup
        // member stopping this way is not mistaken for a failure.
        if (failure) std::rethrow_exception(failure);
        if constexpr (std::is_void_v<T>) {
            child.promise().take();
        } else {
            return child.promise().take();
        }
    }

    /// As a Task (one coroutine frame), for spawn, when_all, TaskGroup::spawn and the like.
    Task<T> into_task() && { return wrap(std::move(*this)); }
    operator Task<T>() && { return wrap(std::move(*this)); }

private:
    static Task<T> wrap(Timeout self) { co_return co_await std::move(self); }

    Task<T> task_;
    std::int64_t deadline_ns_ = 0;
    Clock::duration timeout_{};
    bool relative_ = false;
    bool expired_ = false;
    detail::TimerEntry entry_;
    detail::TimeoutScope* scope_ = nullptr;
    detail::StopState* parent_stop_ = nullptr;
    detail::StopCallback<detail::ForwardStop> link_;
};

/// `task`'s result, or eddy::TimedOut once `deadline` (the runtime's clock) has passed. (Not
/// with_deadline, eddy/io/with_deadline.hpp: that one hands a deadline down to the I/O below
/// it and cancels nothing else.)
template <class T>
Timeout<T> with_timeout(Task<T> task, std::chrono::steady_clock::time_point deadline) {
    return Timeout<T>(std::move(task), deadline);
}

/// `task`'s result, or eddy::TimedOut after `timeout` (measured from when the returned task
/// starts, which is when it is awaited). Huge timeouts saturate; zero or negative ones give
/// the task no time (it starts cancelled, and finishes with its value only if it never
/// suspends).
template <class T, class Rep, class Period>
Timeout<T> with_timeout(Task<T> task, std::chrono::duration<Rep, Period> timeout) {
    using D = std::chrono::steady_clock::duration;
    using Wide = std::chrono::duration<long double, std::nano>;
    D d;
    if (timeout <= std::chrono::duration<Rep, Period>::zero())
        d = D::zero();
    else if (Wide(timeout) >= Wide(D::max()))
        d = D::max();
    else
        d = std::chrono::ceil<D>(timeout);
    return Timeout<T>(std::move(task), d);
}

/// The same for an awaitable that becomes a Task (a with_timeout inside another).
template <detail::IntoTask A>
auto with_timeout(A&& a, std::chrono::steady_clock::time_point deadline) {
    return with_timeout(std::move(a).into_task(), deadline);
}
template <detail::IntoTask A, class Rep, class Period>
auto with_timeout(A&& a, std::chrono::duration<Rep, Period> timeout) {
    return with_timeout(std::move(a).into_task(), timeout);
}

} // namespace eddy
