//! eddy/tasks/errors.hpp: the exceptions eddy throws, each a type of its own so that it can be
//! caught on purpose.
//!
//! Misuse (BrokenTask, WrongThread, RuntimeStopped, NotAbortable, TaskLocalUnset): every error
//! a caller can provoke by using the API wrongly is one of these. Outcomes of concurrent work
//! (OperationCancelled, TimedOut, TaskAborted, ChannelClosed): how a task learns that it was
//! cancelled, ran out of time, or lost its peer. I/O failures are std::system_error carrying
//! the errno (see eddy/io).
//! @file
#pragma once

#include <stdexcept>
#include <system_error>

namespace eddy {

/// Awaiting (or spawning) a Task or JoinHandle that holds no coroutine: default-constructed,
/// moved-from, or already awaited once (awaiting consumes the result).
class BrokenTask : public std::logic_error {
public:
    using std::logic_error::logic_error;
};

/// The runtime is stopped: `spawn` after `Runtime::shutdown()`, or awaiting a JoinHandle
/// (or `block_on`) whose task was destroyed by shutdown before it finished.
class RuntimeStopped : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// An operation that needs a runtime worker (`eddy::spawn`, `yield_now`, `when_all`) was
/// used on a thread that is not one; or `block_on` / `shutdown` was called *from* a worker,
/// where blocking would deadlock the runtime.
class WrongThread : public std::logic_error {
public:
    using std::logic_error::logic_error;
};

/// The task was cancelled while it waited (its own stop_token, a combinator such as
/// when_any / with_timeout / TaskGroup cancelling it, or its parent's cancellation), or it
/// reached a cancellation point (`this_task::check_cancelled()`) after a stop request.
/// A std::system_error with std::errc::operation_canceled, so code that checks the error
/// code keeps working; catch OperationCancelled to tell cancellation from other failures.
class OperationCancelled : public std::system_error {
public:
    /// `what` says which operation was cancelled.
    explicit OperationCancelled(const char* what = "eddy: operation cancelled")
        : std::system_error(std::make_error_code(std::errc::operation_canceled), what) {}
};

/// eddy::with_timeout: the task did not finish in time (it was cancelled and has stopped).
/// A std::system_error with std::errc::timed_out.
class TimedOut : public std::system_error {
public:
    /// `what` says what timed out.
    explicit TimedOut(const char* what = "eddy::with_timeout: the task timed out")
        : std::system_error(std::make_error_code(std::errc::timed_out), what) {}
};

/// Awaiting the JoinHandle (or a JoinSet's join_next) of a task that was aborted
/// (JoinHandle::abort, AbortHandle::abort, JoinSet::abort_all) before it finished, and that
/// then ended by an exception (usually the OperationCancelled its operations threw). A task
/// that returned normally although aborted (it reached no cancellation point) gives its value.
class TaskAborted : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// JoinHandle::abort() or abort_handle() on the handle of a task that was not spawned
/// abortable (eddy::spawn_abortable, Runtime::spawn_abortable, JoinSet::spawn).
class NotAbortable : public std::logic_error {
public:
    using std::logic_error::logic_error;
};

/// `co_await key.get()` on an eddy::task_local that has no value bound for the calling task.
class TaskLocalUnset : public std::logic_error {
public:
    using std::logic_error::logic_error;
};

/// Sending on a closed eddy::Channel or oneshot::Sender whose receiver is gone; receiving
/// from a oneshot whose sender was dropped without sending.
class ChannelClosed : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

}  // namespace eddy
