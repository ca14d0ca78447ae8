//! eddy/time/timeout_of.hpp: eddy::TimeoutOf<A>, what with_timeout returns for an awaitable that
//! is not a Task (an operation such as `stream.read(buf)`, `mutex.lock()`, `eddy::sleep(d)`,
//! another combinator's result, a type of your own). The semantics are with_timeout's
//! (eddy/time/with_timeout.hpp); this file is how it costs no coroutine frame.
//!
//! The operation is awaited in place, by the awaiting task itself: TimeoutOf's await_suspend
//! starts the timer (eddy/time/detail/timeout_arm.hpp), points the awaiting task's promise at the
//! timeout's cancellation for as long as the operation waits, and hands the task to the
//! operation's own await_suspend. The operation registers on that cancellation as it would on
//! the task's; when it resumes the task, await_resume points the promise back, settles the
//! timer, destroys the operation's awaiter (so nothing of it is registered on the scope any
//! more) and only then gives the scope back.
//!
//! While the operation waits, the task's own stop state still reaches it: the timeout's scope
//! is linked under it, as a child's would be. The operation is held as with_timeout got it:
//! moved in (every eddy operation moves until first awaited), or borrowed when its type
//! cannot move (a type of your own: then await the with_timeout in the expression that made
//! it, see eddy/tasks/awaitable.hpp).
//! @file
#pragma once

#include <coroutine>
#include <exception>
#include <functional>
#include <type_traits>
#include <utility>

#include <eddy/time/detail/timeout_arm.hpp>
#include <eddy/tasks/awaitable.hpp>
#include <eddy/tasks/detail/await_trace.hpp>
#include <eddy/tasks/detail/promise.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy {

/// An awaitable held as H (a value, or a reference when borrowed) under a time limit. Move it
/// until it is awaited; await it once.
template <class H, class Extra = detail::NoTimeoutExtra>
class [[nodiscard]] TimeoutOf : public detail::BorrowsLike<H> {
    using A = std::remove_reference_t<H>;

public:
    using value_type = await_result_t<A>;  ///< what awaiting it gives: the operation's result

    /// Made by with_timeout: `a` moved in (or borrowed, H a reference), the time limit `spec`.
    TimeoutOf(A& a, detail::TimeoutSpec spec, Extra extra = {}) noexcept(
        std::is_nothrow_constructible_v<detail::AwaiterSlot<H>, A&>&& std::is_nothrow_move_constructible_v<Extra>)
        : op_(a), arm_(spec), extra_(std::move(extra)) {}
    /// The same with the extra made in place from `args`. (race_sleep.hpp uses it: g++ 12 at
    /// -O3 -Wall warned maybe-uninitialized in the destructor of a moved-from temporary extra,
    /// which failed -Werror builds of `when_any(mutex.lock(), sleep(d))`.)
    template <class... Args>
    TimeoutOf(A& a, detail::TimeoutSpec spec, std::in_place_t, Args&&... args)
        : op_(a), arm_(spec), extra_(std::forward<Args>(args)...) {}
    /// Movable until awaited.
    TimeoutOf(TimeoutOf&& o) noexcept(
        std::is_nothrow_move_constructible_v<detail::AwaiterSlot<H>>&& std::is_nothrow_move_constructible_v<Extra>)
        : op_(std::move(o.op_)), arm_(std::move(o.arm_)), extra_(std::move(o.extra_)) {}
    TimeoutOf& operator=(TimeoutOf&&) = delete;
    ~TimeoutOf() {
        // A frame destroyed while the operation waited (runtime shutdown): the operation's
        // awaiter first (it may be registered on the scope), then the timer and the scope.
        if (arm_.active()) {
            op_.reset();  // first: a with_timeout inside points the promise back at ours
            promise_->set_cancellation(saved_);
            extra_.finish();
            arm_.abandon();
        }
    }

    /// An operation that is ready at once needs no timer.
    bool await_ready() { return op_.get().await_ready(); }

    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> parent) {
        static_assert(std::is_base_of_v<detail::PromiseBase, P>,
                      "eddy::with_timeout around an operation is awaited from an eddy::Task");
        const detail::TaskCancellation* scope = arm_.start(parent, "eddy::with_timeout");
        promise_ = &parent.promise();
        saved_ = promise_->cancellation_scope();
        promise_->set_cancellation(scope);
        extra_.start(arm_.state());
        try {
            // SAFETY: once the operation has the task, another thread may resume it and
            // destroy this object: nothing of it is touched after this call.
            return detail::suspend_on(op_.get(), parent);
        } catch (...) {  // it did not take the task: undo everything
            extra_.finish();
            arm_.settle();
            op_.reset();
            promise_->set_cancellation(saved_);
            arm_.release();
            throw;
        }
    }

    value_type await_resume() { return resume<true>(); }

    /// timeout_or's resume: std::nullopt (false for void) instead of TimedOut.
    detail::maybe_t<value_type> await_resume_or() { return resume<false>(); }

    /// Task dumps: "with_timeout, 80 ms left", and what the operation waits on.
    void dump_wait(detail::DumpWait& d) const {
        arm_.dump(d);
        if constexpr (detail::DescribesWait<typename detail::AwaiterSlot<H>::Awaiter>) {
            if (const auto* w = op_.peek()) {
                d.text(": ");
                w->dump_wait(d);
            }
        }
    }

    /// As a Task (one coroutine frame), where a Task is needed.
    Task<value_type> into_task() && { return wrap(std::move(*this)); }
    /// into_task(), implicitly.
    operator Task<value_type>() && { return wrap(std::move(*this)); }

private:
    using R = value_type;
    static Task<R> wrap(TimeoutOf self) { co_return co_await std::move(self); }

    template <bool Throw>
    std::conditional_t<Throw, R, detail::maybe_t<R>> resume() {
        if (!arm_.active()) return deliver<Throw>();  // ready at once, or an earlier failure
        extra_.finish();
        arm_.settle();
        // The operation's awaiter first (nothing of it stays registered on the scope), then
        // the promise points back at the task's own cancellation (after the operation's
        // resume: a with_timeout inside points it back at ours), then the scope goes.
        struct Release {
            TimeoutOf& self;
            ~Release() {
                self.op_.reset();
                self.promise_->set_cancellation(self.saved_);
                self.arm_.release();
            }
        } release{*this};
        try {
            return deliver<Throw>();
        } catch (const OperationCancelled&) {
            if (!arm_.timed_out()) throw;  // the awaiter's own cancellation
            if constexpr (Throw) throw TimedOut();
            else return detail::maybe_t<R>{};
        }
    }

    template <bool Throw>
    std::conditional_t<Throw, R, detail::maybe_t<R>> deliver() {
        if constexpr (std::is_void_v<R>) {
            op_.get().await_resume();
            if constexpr (!Throw) return true;
        } else if constexpr (Throw || !std::is_reference_v<R>) {
            return op_.get().await_resume();
        } else {
            return std::ref(op_.get().await_resume());
        }
    }

    detail::AwaiterSlot<H> op_;
    detail::TimeoutArm arm_;
    [[no_unique_address]] Extra extra_;
    detail::PromiseBase* promise_ = nullptr;
    const detail::TaskCancellation* saved_ = nullptr;
};

}  // namespace eddy
