//! eddy/io/readiness.hpp: waiting until a descriptor that eddy does not own is ready, so that
//! a library with its own descriptors and event loop (curl's multi interface, c-ares, a
//! database driver's non-blocking connection) can be driven from a task.
//!
//!     unsigned ev = co_await eddy::io::readable(fd);        // POLLIN, or POLLHUP/POLLERR
//!     ev = co_await eddy::io::writable(fd, token);          // POLLOUT, ... ; cancellable
//!     ev = co_await eddy::io::poll(fd, POLLIN | POLLPRI);   // any poll(2) events
//!
//! The pattern: ask the library which descriptor and direction it waits for, `co_await`
//! readable/writable on it, tell the library it is ready (curl_multi_socket_action,
//! ares_process_fd, PQconsumeInput...), repeat; its timeouts go through eddy::sleep or
//! eddy::with_timeout. Each await is one one-shot IORING_OP_POLL_ADD through the reactor: a
//! level-triggered look when it is submitted (a descriptor ready already completes at once),
//! then a wait for the next change. It gives the revents the kernel reported, which may
//! include POLLHUP and POLLERR whatever was asked (as with poll(2)); the library's own call
//! then tells what they mean.
//!
//! The descriptor stays the caller's: eddy neither closes it nor changes its flags, and it
//! must stay open until the await returns (closing it meanwhile is a race, as with poll(2)).
//! Errors: std::system_error with the errno (EBADF for a descriptor that is not open, also -1).
//! Cancellation, by `token` or the task's (eddy/tasks/cancellation.hpp): the poll is
//! cancelled in the kernel and the task resumes with eddy::OperationCancelled once the reactor
//! has let go; nothing is consumed, so the data stays for the next look. Off a worker thread:
//! eddy::WrongThread.
//! @file
#pragma once

#include <poll.h>

#include <coroutine>
#include <stop_token>
#include <utility>

#include <eddy/io/detail/io_awaiter.hpp>

namespace eddy::io {

/// The awaitable of readable(), writable() and poll(): `co_await` gives the revents.
class [[nodiscard]] ReadinessAwaiter {
public:
    /// Points into the caller's descriptor: awaited in place, never spawned
    /// (eddy/tasks/awaitable.hpp).
    using borrows_operands = void;
    /// Made by readable(), writable() and poll().
    ReadinessAwaiter(int fd, unsigned events, const char* what, std::stop_token token) noexcept
        : op_({.kind = detail::IoKind::kPoll, .fd = fd, .len = events}, what, std::move(token)) {}

    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) {
        return op_.await_suspend(h);
    }
    unsigned await_resume() { return static_cast<unsigned>(op_.await_resume()); }

private:
    detail::IoAwaiter op_;
};

/// Waits until `fd` is readable (POLLIN) or reports POLLHUP/POLLERR; gives the revents.
[[nodiscard]] inline ReadinessAwaiter readable(int fd, std::stop_token token = {}) noexcept {
    return {fd, POLLIN, "eddy::io::readable", std::move(token)};
}

/// Waits until `fd` is writable (POLLOUT) or reports POLLHUP/POLLERR; gives the revents.
[[nodiscard]] inline ReadinessAwaiter writable(int fd, std::stop_token token = {}) noexcept {
    return {fd, POLLOUT, "eddy::io::writable", std::move(token)};
}

/// Waits until `fd` reports any of `events` (poll(2) bits: POLLIN, POLLOUT, POLLPRI,
/// POLLRDHUP...) or POLLHUP/POLLERR; gives the revents.
[[nodiscard]] inline ReadinessAwaiter poll(int fd, unsigned events, std::stop_token token = {}) noexcept {
    return {fd, events, "eddy::io::poll", std::move(token)};
}

}  // namespace eddy::io
