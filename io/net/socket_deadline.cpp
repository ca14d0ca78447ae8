// io/net/socket_deadline.cpp: a socket operation that has to wait under a deadline
// (eddy::with_deadline). Why a poll of its own: see eddy/net/detail/socket_io.hpp, "Under a
// deadline".
//
// # One wait
//   SocketAwaiter::wait_with_deadline() runs on the worker after an attempt would block. It
//   allocates the wait (once per operation: later rounds reuse it) and submits a one-shot
//   POLL_ADD for the operation's direction through the reactor, with the deadline in the
//   operation (operation.hpp), so that the reactor links it to a LINK_TIMEOUT. The
//   operation's completion queues the wait as a Runnable (its `waiter` is the wait's queue
//   item), which runs on a worker: on readiness it attempts the operation again and
//   resumes the frame once it settled, or submits another poll if the socket is still not
//   ready (a readiness the read of another task consumed). A poll that failed ends the
//   operation with its result: kDeadlineResult (eddy::TimedOut), -ECANCELED
//   (OperationCancelled) or the errno.
//
// # Cancellation and reuse
//   Each round arms the operation's cancel registration (CancelRegistration, operation.hpp)
//   afresh, then submits: a stop that comes before the registration makes it not submit; one
//   after it cancels the poll in the kernel through the usual protocol. The round's
//   callbacks are unregistered before the next round resets the operation (they might
//   otherwise post a cancel for the next submission after its reset: a lost or doubled
//   node), and before the wait is freed.
#include "reactor/poll_state.hpp"
#include "reactor/reactor.hpp"

#include <poll.h>

#include <cerrno>
#include <coroutine>
#include <new>

#include <eddy/time/detail/deadline.hpp>
#include <eddy/io/detail/operation.hpp>
#include <eddy/net/detail/socket_io.hpp>

namespace eddy::detail {

class SocketDeadlineWait : public Runnable {
public:
    SocketDeadlineWait(SocketAwaiter& owner, std::int64_t deadline_ns, StopState* task) noexcept
        : Runnable{&SocketDeadlineWait::on_poll}, owner_(&owner), task_(task), deadline_ns_(deadline_ns) {}
    SocketDeadlineWait(const SocketDeadlineWait&) = delete;
    SocketDeadlineWait& operator=(const SocketDeadlineWait&) = delete;

    /// One round: submits the poll, or settles the operation (false: owner's result_ set)
    /// when its deadline passed or it is cancelled. After true, touch nothing of the
    /// owner, its frame or this wait.
    bool submit() noexcept {
        SocketAwaiter& a = *owner_;
        if (a.token_.stop_requested() || stop_requested(task_)) {
            a.result_ = -ECANCELED;
            return false;
        }
        if (deadline_passed(deadline_ns_)) {
            a.result_ = kDeadlineResult;
            return false;
        }
        // A new operation each round: the last one's completion was fully delivered (this
        // runs after the reactor queued us, or before any submission), and its callbacks are
        // gone (end_round()).
        op_.~IoOperation();
        new (&op_) IoOperation();
        op_.io = IoKind::kPoll;
        op_.fd = a.state_->fd();
        op_.len = SocketAwaiter::dir_of(a.op_) == PollState::kWrite ? POLLOUT : POLLIN;
        op_.deadline_ns = deadline_ns_;
        op_.reactor = a.home_;  // this runtime's, whatever the state is bound to
        // Resumed as a Runnable: see Operation::waiter.
        op_.waiter = std::coroutine_handle<>::from_address(queue_item(this));
        if (!cancel_.arm(op_, a.token_, task_)) {
            a.result_ = -ECANCELED;
            return false;
        }
        detail::submit(*op_.reactor, op_);  // the last touch: see operation.hpp
        return true;
    }

    /// Before the wait is freed or the operation reused: unregisters the round's callbacks.
    void end_round() noexcept { cancel_.disarm(); }

private:
    static void on_poll(Runnable* r) noexcept {
        auto* self = static_cast<SocketDeadlineWait*>(r);
        SocketAwaiter& a = *self->owner_;
        const std::coroutine_handle<> frame = a.frame_;
        self->end_round();
        if (!self->settle()) return;  // waiting again
        frame.resume();
    }

    /// After a poll completed: true when the operation settled (resume the frame).
    bool settle() noexcept {
        SocketAwaiter& a = *owner_;
        if (op_.result < 0) {
            a.result_ = op_.result;  // kDeadlineResult, -ECANCELED, or the poll's errno
            return true;
        }
        if (a.state_->closed()) {  // closed by another task: what close() promises
            a.result_ = SocketAwaiter::closed_result(a.op_);
            return true;
        }
        if (a.attempt()) return true;
        return !submit();  // not ready after all (another reader took it): wait again
    }

    SocketAwaiter* owner_;
    StopState* task_;
    std::int64_t deadline_ns_;
    IoOperation op_;
    // Destroyed before op_: its destructor waits for a callback running on another thread.
    CancelRegistration cancel_;
};

bool SocketAwaiter::wait_with_deadline(std::int64_t deadline_ns, StopState* task) {
    deadline_wait_ = new SocketDeadlineWait(*this, deadline_ns, task);  // std::bad_alloc: not suspended
    return deadline_wait_->submit();
}

void end_deadline_wait(SocketDeadlineWait* w) noexcept {
    if (w == nullptr) return;
    w->end_round();
    delete w;
}

}  // namespace eddy::detail
