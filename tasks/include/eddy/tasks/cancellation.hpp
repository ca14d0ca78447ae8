//! eddy/tasks/cancellation.hpp: how a task learns that it is cancelled, and how it shields
//! work from cancellation.
//!
//! # The model
//! Every task runs under a cancellation (or none): a stop state of eddy's own
//! (detail/stop_state.hpp), which code outside eddy sees as a std::stop_token. An awaited
//! task inherits its awaiter's; the children of when_all, when_any and a TaskGroup run under
//! one of the combinator's own, which is stopped when the combinator's awaiter is cancelled
//! and when the combinator decides to stop them (a sibling failed, a winner finished, a
//! timeout expired).
//! Spawned tasks (eddy::spawn, Runtime::spawn) start uncancellable, like Tokio's.
//!
//! What a stop request does to a task:
//!   * whatever it is suspended on (a socket or file operation, a sleep, a Mutex, Semaphore,
//!     Event, Latch or channel wait) is cancelled: I/O with IORING_OP_ASYNC_CANCEL, timers and
//!     waits by removal. The task resumes with eddy::OperationCancelled once the operation has
//!     really let go (an I/O buffer is never written after the task moved on);
//!   * an operation that had completed before the cancel took effect delivers its result
//!     instead, exactly once (no bytes of a partial read are lost); the next suspending
//!     operation then throws;
//!   * a suspending operation started after the stop request throws at once, without
//!     suspending;
//!   * computation is not interrupted: a long loop checks `this_task::check_cancelled()`;
//!   * not cancellation points: awaiting a JoinHandle (a spawned task is not a child: use a
//!     TaskGroup member or an awaited child task instead) and a sleep whose deadline has
//!     already passed (it never suspends).
//! OperationCancelled then unwinds the task like any exception; the combinator that cancelled
//! it waits for it to finish (its frame destroyed) before going on.
//!
//! # Tools
//!     std::stop_token t = co_await eddy::this_task::stop_token();  // empty when uncancellable
//!     co_await eddy::this_task::check_cancelled();  // throws OperationCancelled if stopped
//!     co_await eddy::shield(conn.close_gracefully());  // runs to the end, whatever happens
//!     co_await eddy::with_stop_token(work(), source.get_token());  // your own cancel button
//! @file
#pragma once

#include <coroutine>
#include <optional>
#include <stop_token>
#include <utility>

#include <eddy/tasks/awaitable.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy {

namespace detail {

/// Awaiting it gives the awaiting task's cancellation token, without suspending.
class CurrentStopToken {
public:
    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
        if (const TaskCancellation* c = cancellation_scope_of(h)) token_ = c->share();
        return false;  // never suspends: only looks at the promise
    }
    std::stop_token await_resume() noexcept { return std::move(token_); }

private:
    std::stop_token token_;
};

/// Awaiting it gives the awaiting task's scope (nullptr: none), without suspending: to run a
/// child under a scope derived from it.
class CurrentScope {
public:
    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
        scope_ = cancellation_scope_of(h);
        return false;
    }
    const TaskCancellation* await_resume() const noexcept { return scope_; }

private:
    const TaskCancellation* scope_ = nullptr;
};

/// Awaiting it throws OperationCancelled if the awaiting task's cancellation was requested.
class CheckCancelled {
public:
    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
        cancelled_ = stop_requested(cancellation_of(h));
        return false;
    }
    void await_resume() const {
        if (cancelled_) throw OperationCancelled("eddy::this_task::check_cancelled: the task is cancelled");
    }

private:
    bool cancelled_ = false;
};

}  // namespace detail

namespace this_task {

/// `co_await eddy::this_task::stop_token()`: the calling task's cancellation token, to pass
/// to code that takes a std::stop_token or to poll. Empty (stop_possible() false) for a task
/// that cannot be cancelled.
[[nodiscard]] inline detail::CurrentStopToken stop_token() noexcept { return {}; }

/// `co_await eddy::this_task::check_cancelled()`: a cancellation point for long computations;
/// throws eddy::OperationCancelled if the calling task's cancellation was requested.
[[nodiscard]] inline detail::CheckCancelled check_cancelled() noexcept { return {}; }

}  // namespace this_task

/// Runs `task` shielded from cancellation: neither its awaiter's cancellation nor any
/// combinator above reaches it, so cleanup (an async close, a final write) runs to the end.
/// The awaiter's own cancellation still applies to what it awaits afterwards.
template <class T>
Task<T> shield(Task<T> task) {
    const detail::TaskCancellation* parent = co_await detail::CurrentScope{};
    // No token, but what else the awaiter passes down (task-locals, coop::unconstrained);
    // not its deadline (eddy::with_deadline), a cancellation too.
    detail::TaskCancellation own;
    own.inherit(parent);
    own.deadline_ns = detail::TaskCancellation::kNoDeadline;
    co_return co_await typename Task<T>::Awaiter(task, &own);
}

/// shield() for any other awaitable (a frame of its own).
template <detail::NonTaskAwaitable A>
auto shield(A&& a) {
    return shield(detail::in_place_task(std::forward<A>(a)));
}

/// Runs `task` under `token` as well as under its awaiter's cancellation: a stop request on
/// either cancels it (then OperationCancelled, as for any cancellation).
template <class T>
Task<T> with_stop_token(Task<T> task, std::stop_token token) {
    const detail::TaskCancellation* parent = co_await detail::CurrentScope{};
    detail::LinkedStopSource both(parent);
    std::stop_callback also(token, [&both]() noexcept { both.request_stop(); });
    co_return co_await typename Task<T>::Awaiter(task, both.token());
}

/// with_stop_token() for any other awaitable (a frame of its own).
template <detail::NonTaskAwaitable A>
auto with_stop_token(A&& a, std::stop_token token) {
    return with_stop_token(detail::in_place_task(std::forward<A>(a)), std::move(token));
}

}  // namespace eddy
