// io/reactor/link_timeout.cpp: how an operation under a deadline (eddy::with_deadline) reaches the
// kernel, and how its expiry comes back. Reactor thread only. See operation.hpp ("Deadline").
//
// # The pair
//   The operation's SQE gets IOSQE_IO_LINK and is followed by an IORING_OP_LINK_TIMEOUT
//   with IORING_TIMEOUT_ABS on the operation's deadline (steady_clock ns == CLOCK_MONOTONIC,
//   the kernel's clock for timeouts). The two must be adjacent in one submission: a full SQ
//   submitted between them would leave the operation linked to nothing, so both slots are
//   taken together (next_linked_sqe). The timespec lives in the operation (deadline_ts),
//   which lives until its CQE, well past the submission that reads it.
//   The same holds for every resubmission: -EINTR goes through start_io() again and -EAGAIN
//   through submit_poll(), and both link again (the deadline is absolute, so a retry does not
//   extend it; one already past fires at once).
//
// # The completions
//   The link timeout's CQE carries kLinkTimeoutTag: -ETIME when it fired (the operation was
//   cancelled), -ECANCELED when the operation completed first (or failed at submission);
//   handle_cqe() ignores it. It is counted in pending_cqes_ like any SQE that completes.
//   The operation's CQE then carries -ECANCELED. deadline_result() tells this from the
//   operation's own cancellation (its cancel node arrived: OperationCancelled) and from a
//   link that failed (the deadline has not passed: the kernel refused the pair): only a
//   cancellation the operation did not ask for, after its deadline, is kDeadlineResult, which
//   its awaiter throws as eddy::TimedOut.
//
// # One place to change for a paused clock
//   link_deadline() is the one function that turns a deadline into a kernel timespec and a
//   link SQE; deadline_result() the one that reads the real clock back. A virtual test clock
//   that kernel timeouts cannot follow would replace both (by a reactor timer that cancels
//   the operation) and leave the awaiters alone.
#include "reactor/reactor.hpp"

#include <linux/time_types.h>

#include <cstddef>

namespace eddy::detail {

static_assert(sizeof(KernelTimespec) == sizeof(__kernel_timespec) &&
                  offsetof(KernelTimespec, tv_sec) == offsetof(__kernel_timespec, tv_sec) &&
                  offsetof(KernelTimespec, tv_nsec) == offsetof(__kernel_timespec, tv_nsec),
              "KernelTimespec must be laid out as struct __kernel_timespec");

io_uring_sqe* Reactor::next_linked_sqe() {
    // The ring has at least 2 entries (see the constructor), so this ends.
    while (io_uring_sq_space_left(&ring_) < 2) make_room();
    return next_sqe();  // the link timeout's slot is free too, and nothing is submitted between
}

void Reactor::link_deadline(io_uring_sqe* sqe, IoOperation* op) {
    sqe->flags |= IOSQE_IO_LINK;
    op->deadline_ts.tv_sec = op->deadline_ns / 1'000'000'000;
    op->deadline_ts.tv_nsec = op->deadline_ns % 1'000'000'000;
    io_uring_sqe* timeout = next_sqe();  // reserved by next_linked_sqe(): adjacent
    io_uring_prep_link_timeout(timeout, reinterpret_cast<__kernel_timespec*>(&op->deadline_ts), IORING_TIMEOUT_ABS);
    io_uring_sqe_set_data64(timeout, kLinkTimeoutTag);
    ++pending_cqes_;
}

std::int32_t Reactor::deadline_result(const IoOperation& op, std::int32_t res) noexcept {
    if (op.deadline_ns == kNoDeadline || op.cancel_arrived) return res;
    return op.deadline_ns <= deadline_now_ns() ? kDeadlineResult : res;
}

}  // namespace eddy::detail
