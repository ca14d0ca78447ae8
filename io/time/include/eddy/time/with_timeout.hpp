//! eddy/time/with_timeout.hpp: eddy::with_timeout, an operation or a task with a time limit (a
//! duration or a time point).
//!
//!     std::size_t n = co_await eddy::with_timeout(stream.read(buf), 5s);     // or TimedOut
//!     std::string line = co_await eddy::with_timeout(read_line(conn), 5s);   // a Task
//!     std::optional<std::size_t> m = co_await eddy::timeout_or(stream.read(buf), 5s);  // no throw
//!
//! It takes any eddy::Awaitable (eddy/tasks/awaitable.hpp): an operation (a read, a lock, a
//! receive, a sleep), a Task, another combinator's result, a type of your own. The operation
//! runs at once on the awaiting worker, under a cancellation of its own that is linked under
//! the awaiter's, while a timer waits on that worker's timer queue (eddy/time/detail/timer.hpp,
//! eddy/time/detail/timeout_arm.hpp). If it finishes first, its value is returned (or its
//! exception rethrown) and the timer is unlinked: no trip to the reactor, no allocation. If
//! the time runs out first, the reactor stops that cancellation (what the operation waits on
//! throws eddy::OperationCancelled, eddy/tasks/cancellation.hpp) and with_timeout waits until
//! it has stopped. Then:
//!   * if it stopped by that cancellation, eddy::TimedOut is thrown (a std::system_error with
//!     std::errc::timed_out), or timeout_or gives std::nullopt;
//!   * if it finished anyway (the cancel came too late: its read had completed, say), its
//!     value is returned: a result is never thrown away, so no bytes a read consumed are lost;
//!   * if it failed with another exception, that exception is rethrown.
//! Cancelling the awaiter cancels the operation (OperationCancelled, not TimedOut). What
//! does not listen to cancellation (a computation, a type of your own that ignores eddy's
//! stop state) runs to its end: a timeout cannot take it away, unlike dropping a Rust future.
//! Awaiting off a worker throws eddy::WrongThread; an empty task eddy::BrokenTask.
//!
//! Costs. with_timeout returns an awaitable that costs nothing until awaited and allocates
//! nothing when awaited: for a Task an eddy::Timeout<T> (the task's own frame is the only
//! one), for any other awaitable an eddy::TimeoutOf<A> (eddy/time/timeout_of.hpp), which awaits
//! the operation in place, with no coroutine frame at all. Both convert to a Task (one
//! frame) where a Task is needed.
//! @file
#pragma once

#include <chrono>
#include <coroutine>
#include <exception>
#include <functional>
#include <optional>
#include <type_traits>
#include <utility>

#include <eddy/time/detail/timeout_arm.hpp>
#include <eddy/time/timeout_of.hpp>
#include <eddy/runtime/detail/children.hpp>
#include <eddy/tasks/awaitable.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy {

/// What with_timeout returns for a Task: awaiting it runs the task under the time limit.
/// Move it until it is awaited; await it once.
template <class T>
class [[nodiscard]] Timeout {
public:
    using Clock = std::chrono::steady_clock;  ///< the runtime's clock reads this time
    using value_type = T;                     ///< what awaiting it gives

    /// `task` with the time limit `deadline`.
    Timeout(Task<T> task, Clock::time_point deadline) noexcept
        : task_(std::move(task)), arm_(detail::TimeoutSpec::at(deadline)) {}
    /// `task` with the time limit `timeout` after it is awaited.
    Timeout(Task<T> task, Clock::duration timeout) noexcept
        : task_(std::move(task)), arm_(detail::TimeoutSpec::after(timeout)) {}
    /// Movable until awaited.
    Timeout(Timeout&& other) noexcept : task_(std::move(other.task_)), arm_(std::move(other.arm_)) {}
    Timeout& operator=(Timeout&&) = delete;
    Timeout(const Timeout&) = delete;
    ~Timeout() {
        // Only a frame destroyed while the task ran (runtime shutdown) gets here started: the
        // task's frame goes first, since it may still unregister callbacks on the scope.
        if (arm_.active()) {
            task_ = Task<T>{};
            arm_.abandon();
        }
    }

    bool await_ready() const noexcept { return false; }

    /// Task dumps: "with_timeout, 80 ms left", the task under it.
    void dump_wait(detail::DumpWait& d) const {
        arm_.dump(d);
        d.child(detail::TaskAccess::get(task_));
    }

    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> parent) {
        auto child = detail::TaskAccess::get(task_);
        if (!child) throw BrokenTask("eddy::with_timeout: the task is empty (moved-from or already awaited)");
        child.promise().set_cancellation(arm_.start(parent, "eddy::with_timeout"));
        child.promise().set_continuation(parent);
        return child;  // symmetric transfer: the task runs now
    }

    T await_resume() { return resume<true>(); }

    /// timeout_or's resume: std::nullopt (false for a void task) instead of TimedOut.
    detail::maybe_t<T> await_resume_or() { return resume<false>(); }

    /// As a Task (one coroutine frame), for spawn, when_all, TaskGroup::spawn and the like.
    Task<T> into_task() && { return wrap(std::move(*this)); }
    /// into_task(), implicitly.
    operator Task<T>() && { return wrap(std::move(*this)); }

private:
    static Task<T> wrap(Timeout self) { co_return co_await std::move(self); }

    template <bool Throw>
    std::conditional_t<Throw, T, detail::maybe_t<T>> resume() {
        // The timer: unlinked (it will never fire) or it fired (the reactor stopped the scope).
        arm_.settle();
        auto child = detail::TaskAccess::get(task_);
        std::exception_ptr failure = child.promise().exception();
        const bool timed_out = arm_.timed_out() && failure && detail::is_cancellation(failure);
        struct Release {  // the task's frame first, then the scope it ran under
            Timeout& self;
            ~Release() {
                self.task_ = Task<T>{};
                self.arm_.release();
            }
        } release{*this};
        if (timed_out) {
            if constexpr (Throw) throw TimedOut();
            else return detail::maybe_t<T>{};
        }
        // A cancellation of the awaiter: OperationCancelled, not TimedOut, so that a TaskGroup
        // member stopping this way is not mistaken for a failure.
        if (failure) std::rethrow_exception(failure);
        if constexpr (std::is_void_v<T>) {
            child.promise().take();
            if constexpr (!Throw) return true;
        } else if constexpr (Throw || !std::is_reference_v<T>) {
            return child.promise().take();
        } else {
            return std::ref(child.promise().take());
        }
    }

    Task<T> task_;
    detail::TimeoutArm arm_;
};

/// The result of with_timeout(a, deadline) or (a, duration): a Timeout<T> for a Task, a
/// TimeoutOf<A> for any other awaitable (no coroutine frame).
template <class A>
using with_timeout_t = std::conditional_t<detail::is_task_v<std::remove_cvref_t<A>>, Timeout<await_result_t<A>>,
                                          TimeoutOf<detail::held_t<A>>>;

namespace detail {
template <class A>
with_timeout_t<A> make_timeout(A&& a, TimeoutSpec spec) {
    static_assert(std::is_rvalue_reference_v<A&&>,
                  "eddy::with_timeout takes the operation over: pass a temporary or std::move(op)");
    if constexpr (is_task_v<std::remove_cvref_t<A>>) {
        if (spec.relative) return Timeout<await_result_t<A>>(std::forward<A>(a), spec.timeout);
        return Timeout<await_result_t<A>>(
            std::forward<A>(a), std::chrono::steady_clock::time_point(std::chrono::nanoseconds(spec.deadline_ns)));
    } else {
        return TimeoutOf<held_t<A>>(a, spec);
    }
}
}  // namespace detail

/// `a`'s result, or eddy::TimedOut once `deadline` (the runtime's clock) has passed. (Not
/// with_deadline, eddy/time/with_deadline.hpp: that one hands a deadline down to the I/O below
/// it and cancels nothing else.)
template <Awaitable A>
auto with_timeout(A&& a, std::chrono::steady_clock::time_point deadline) {
    return detail::make_timeout(std::forward<A>(a), detail::TimeoutSpec::at(deadline));
}

/// `a`'s result, or eddy::TimedOut after `timeout` (measured from when the result is
/// awaited). Huge timeouts saturate; zero or negative ones give the operation no time (it
/// starts cancelled, and finishes with its value only if it never suspends).
template <Awaitable A, class Rep, class Period>
auto with_timeout(A&& a, std::chrono::duration<Rep, Period> timeout) {
    return detail::make_timeout(std::forward<A>(a), detail::TimeoutSpec::after(detail::timeout_ticks(timeout)));
}

/// What timeout_or returns: the with_timeout `Inner` (a Timeout or a TimeoutOf), giving
/// std::nullopt (false for void) when the time ran out instead of throwing TimedOut.
template <class Inner>
class [[nodiscard]] TimeoutOr : public detail::BorrowsIf<borrows_operands_v<Inner>> {
public:
    /// std::optional of the operation's result; bool for void.
    using value_type = detail::maybe_t<typename Inner::value_type>;

    /// Made by timeout_or.
    explicit TimeoutOr(Inner inner) noexcept(std::is_nothrow_move_constructible_v<Inner>) : inner_(std::move(inner)) {}
    /// Movable until awaited.
    TimeoutOr(TimeoutOr&&) noexcept(std::is_nothrow_move_constructible_v<Inner>) = default;
    TimeoutOr& operator=(TimeoutOr&&) = delete;

    bool await_ready() { return inner_.await_ready(); }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> parent) {
        return inner_.await_suspend(parent);
    }
    value_type await_resume() { return inner_.await_resume_or(); }
    void dump_wait(detail::DumpWait& d) const { inner_.dump_wait(d); }

    /// As a Task (one coroutine frame), where a Task is needed.
    Task<value_type> into_task() && { return wrap(std::move(*this)); }
    /// into_task(), implicitly.
    operator Task<value_type>() && { return wrap(std::move(*this)); }

private:
    static Task<value_type> wrap(TimeoutOr self) { co_return co_await std::move(self); }
    Inner inner_;
};

/// with_timeout without the exception: `a`'s result as std::optional (for `void`, a bool:
/// true when it finished in time; for `T&`, std::optional<std::reference_wrapper<T>>), or
/// std::nullopt once `deadline` has passed. Everything else is with_timeout's: other
/// exceptions, the awaiter's own cancellation (OperationCancelled) pass through.
///
///     if (auto n = co_await eddy::timeout_or(stream.read(buf), 30s)) use(*n);
///     else co_await stream.write_all(idle_message);  // allowed here, unlike in a catch block
template <Awaitable A>
auto timeout_or(A&& a, std::chrono::steady_clock::time_point deadline) {
    return TimeoutOr<with_timeout_t<A>>(with_timeout(std::forward<A>(a), deadline));
}

/// The same with a duration, measured from when the result is awaited.
template <Awaitable A, class Rep, class Period>
auto timeout_or(A&& a, std::chrono::duration<Rep, Period> timeout) {
    return TimeoutOr<with_timeout_t<A>>(with_timeout(std::forward<A>(a), timeout));
}

}  // namespace eddy
