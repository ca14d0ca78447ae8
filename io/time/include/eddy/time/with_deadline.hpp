//! eddy/time/with_deadline.hpp: eddy::with_deadline(time, task), a deadline inherited through the
//! task tree, and eddy::this_task::deadline().
//!
//!     co_await eddy::with_deadline(500ms, handle(conn));   // or a steady_clock::time_point
//!     ...                                                   // anywhere below:
//!     std::size_t n = co_await conn.read(buf);              // eddy::TimedOut past the deadline
//!     auto d = co_await eddy::this_task::deadline();        // std::optional<time_point>
//!
//! Who sees it: the task and, like cancellation and task_local values, every task it awaits,
//! the children of when_all, when_any, with_timeout and a TaskGroup started below it. Not
//! spawned tasks (eddy::spawn, JoinSet: they start with none), nor shield()ed ones (a
//! deadline is a kind of cancellation, and shield runs cleanup to the end). A nested
//! with_deadline only tightens: the tasks under it get the earlier of the two.
//!
//! What it does: every I/O operation that has to go to the kernel under it carries the
//! deadline there, linked to an IORING_OP_LINK_TIMEOUT with an absolute CLOCK_MONOTONIC time
//! (io/reactor/link_timeout.cpp): no timer in the reactor or on the worker, and nothing to disarm
//! when the operation completes first. Expiry cancels the operation in the kernel, and its
//! awaiter throws eddy::TimedOut (a std::system_error with std::errc::timed_out); an
//! operation whose deadline passed before it would be submitted throws it at once, without
//! submitting. What completes at once (data already there, a write that fits) keeps its
//! value. Socket reads and writes (TcpStream, UnixStream, accept) wait on a one-shot poll of
//! their own, linked the same way, instead of the socket's shared multishot poll
//! (eddy/net/detail/socket_io.hpp, "Under a deadline").
//!
//! What it does not do: interrupt computation, or waits that are not I/O (sleep, a Mutex, a
//! Channel, an Event, awaiting a JoinHandle). Those run on; use with_timeout(task, d) for a
//! limit that cancels whatever the task waits on, at the price of a timer per call.
//! (with_timeout(task, duration or time_point), eddy/time/with_timeout.hpp, is that.)
//!
//! Under a virtual clock (RuntimeConfig::clock paused or manual, eddy/runtime/time.hpp) the
//! kernel's timeouts cannot follow the runtime's time: there with_deadline is a with_timeout at
//! the same time point (a timer on the virtual clock that stops the task, which also ends its
//! non-I/O waits), the operations under it link nothing, and this_task::deadline() still
//! reports the deadline. The deadline is read on the runtime's clock either way.
//!
//! Cost: a with_deadline is one coroutine frame; under it, each operation that goes to the
//! kernel costs one more SQE and one more CQE, and a clock read; without a deadline, one
//! branch on the path that waits. Errors: what the task throws, passed on; eddy::TimedOut
//! from the operations it reaches; an empty task eddy::BrokenTask.
//! @file
#pragma once

#include <algorithm>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <limits>
#include <optional>

#include <eddy/time/detail/deadline.hpp>
#include <eddy/time/with_timeout.hpp>
#include <eddy/runtime/detail/clock.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy {

namespace detail {

/// `deadline` as ns since steady_clock's epoch, clamped below kNoDeadline.
inline std::int64_t deadline_ns_of(std::chrono::steady_clock::time_point deadline) noexcept {
    using Ns = std::chrono::duration<std::int64_t, std::nano>;
    const auto since = deadline.time_since_epoch();
    if (since >= std::chrono::duration_cast<std::chrono::steady_clock::duration>(Ns(kNoDeadline - 1)))
        return kNoDeadline - 1;
    return std::chrono::duration_cast<Ns>(since).count();
}

/// `d` in ns, at least 0, saturated below kNoDeadline.
template <class Rep, class Period>
std::int64_t saturated_ns(std::chrono::duration<Rep, Period> d) noexcept {
    using Wide = std::chrono::duration<long double, std::nano>;
    if (d <= std::chrono::duration<Rep, Period>::zero()) return 0;
    if (Wide(d) >= Wide(static_cast<long double>(kNoDeadline - 1))) return kNoDeadline - 1;
    return std::chrono::ceil<std::chrono::nanoseconds>(d).count();
}

/// A with_deadline's time: `ns` since steady_clock's epoch, or `ns` after the task starts.
struct DeadlineSpec {
    std::int64_t ns;
    bool relative;
    std::int64_t resolve() const noexcept {
        if (!relative) return ns;
        return std::min(add_saturated(deadline_now_ns(), std::chrono::nanoseconds(ns)), kNoDeadline - 1);
    }
};

/// with_timeout(task, at), as a task of its own: run under with_deadline's scope, so that the
/// timeout's task inherits the deadline (and task-local values) too.
template <class T>
Task<T> timed_until(Task<T> task, std::int64_t at_ns) {
    co_return co_await with_timeout(std::move(task),
                                    std::chrono::steady_clock::time_point(std::chrono::nanoseconds(at_ns)));
}

/// Runs `task` under a scope derived from its awaiter's with the earlier deadline.
template <class T>
Task<T> run_with_deadline(DeadlineSpec spec, Task<T> task) {
    const TaskCancellation* parent = co_await CurrentScope{};
    TaskCancellation own(parent, TaskCancellation::Derive{});     // same token, locals, budget
    own.deadline_ns = std::min(own.deadline_ns, spec.resolve());  // only ever tightens
    if (clock_is_virtual()) [[unlikely]] {
        Task<T> timed = timed_until(std::move(task), own.deadline_ns);  // see "Under a virtual clock"
        co_return co_await typename Task<T>::Awaiter(timed, &own);
    }
    co_return co_await typename Task<T>::Awaiter(task, &own);
}

/// Awaiting it gives the awaiting task's deadline, without suspending.
class CurrentDeadline {
public:
    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
        deadline_ns_ = deadline_of(cancellation_scope_of(h));
        return false;
    }
    std::optional<std::chrono::steady_clock::time_point> await_resume() const noexcept {
        if (deadline_ns_ == kNoDeadline) return std::nullopt;
        return std::chrono::steady_clock::time_point(
            std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::nanoseconds(deadline_ns_)));
    }

private:
    std::int64_t deadline_ns_ = kNoDeadline;
};

}  // namespace detail

/// Runs `task` with the deadline `deadline` (steady clock) for every I/O operation under it
/// (see above); gives its result.
template <class T>
Task<T> with_deadline(std::chrono::steady_clock::time_point deadline, Task<T> task) {
    return detail::run_with_deadline(detail::DeadlineSpec{detail::deadline_ns_of(deadline), false}, std::move(task));
}

/// The same with the deadline `timeout` after the task starts (when it is awaited). Zero or
/// negative: the deadline has passed (every operation that has to wait throws TimedOut);
/// huge: saturates.
template <class T, class Rep, class Period>
Task<T> with_deadline(std::chrono::duration<Rep, Period> timeout, Task<T> task) {
    return detail::run_with_deadline(detail::DeadlineSpec{detail::saturated_ns(timeout), true}, std::move(task));
}

/// The same for any other awaitable (eddy/tasks/awaitable.hpp): an operation, a with_timeout,
/// a when_all. It runs in a frame of its own.
template <detail::NonTaskAwaitable A>
auto with_deadline(std::chrono::steady_clock::time_point deadline, A&& a) {
    return with_deadline(deadline, detail::in_place_task(std::forward<A>(a)));
}
/// The same with a duration, measured from when it is awaited.
template <detail::NonTaskAwaitable A, class Rep, class Period>
auto with_deadline(std::chrono::duration<Rep, Period> timeout, A&& a) {
    return with_deadline(timeout, detail::in_place_task(std::forward<A>(a)));
}

namespace this_task {

/// `co_await eddy::this_task::deadline()`: the calling task's deadline (eddy::with_deadline),
/// std::nullopt when it has none.
[[nodiscard]] inline detail::CurrentDeadline deadline() noexcept { return {}; }

}  // namespace this_task

}  // namespace eddy
