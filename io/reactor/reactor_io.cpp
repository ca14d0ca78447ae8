// io/reactor/reactor_io.cpp: how an I/O operation and a socket's poll go into the ring, and how
// their completions come back (the flow is in reactor.hpp, the cancel protocol in
// operation.hpp); the loop that calls these is in reactor.cpp.
#include "reactor/reactor.hpp"

#include "reactor/poll_state.hpp"

#include <poll.h>
#include <sys/wait.h>

#include <eddy/runtime/metrics.hpp>

namespace eddy::detail {

static_assert(IORING_OP_SENDMSG_ZC == 48, "the io_uring opcodes kOpWaitId counts from");

namespace {

bool waits_for_write(IoKind k) noexcept {
    return k == IoKind::kWrite || k == IoKind::kWritev || k == IoKind::kSend || k == IoKind::kSendMsg ||
           k == IoKind::kConnect;
}

/// The group an operation's latency is counted in (ReactorMetrics::io_latency).
IoOpKind latency_kind(IoKind k) noexcept {
    switch (k) {
    case IoKind::kRead:
    case IoKind::kReadv:
        return IoOpKind::read;
    case IoKind::kWrite:
    case IoKind::kWritev:
        return IoOpKind::write;
    case IoKind::kRecv:
    case IoKind::kRecvMsg:
        return IoOpKind::recv;
    case IoKind::kSend:
    case IoKind::kSendMsg:
        return IoOpKind::send;
    case IoKind::kAccept:
        return IoOpKind::accept;
    case IoKind::kConnect:
        return IoOpKind::connect;
    case IoKind::kFsync:
        return IoOpKind::fsync;
    case IoKind::kPoll:
        return IoOpKind::poll;
    case IoKind::kOpenAt:
    case IoKind::kOpenAt2:
    case IoKind::kStatx:
    case IoKind::kRenameAt:
    case IoKind::kUnlinkAt:
    case IoKind::kMkdirAt:
    case IoKind::kWaitId:  // not timed: see complete()
        break;
    }
    return IoOpKind::fs;
}

bool pollable(IoKind k) noexcept {
    return k != IoKind::kFsync && k != IoKind::kOpenAt && k != IoKind::kPoll && k < IoKind::kStatx;  // kStatx..: paths
}

}  // namespace

void Reactor::arm_poll(PollState* s) {
    if (epoll_ != nullptr) {
        epoll_arm_poll(s);
        return;
    }
    if (!s->begin_arm()) {  // closed before we got here
        s->release();       // the node's reference
        return;
    }
    // The node's reference is the armed poll's now, until its last completion.
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_poll_add(sqe, s->fd(), POLLIN | POLLOUT | POLLRDHUP | POLLPRI);
    if (multishot_poll_) sqe->len |= IORING_POLL_ADD_MULTI;
    io_uring_sqe_set_data64(sqe, reinterpret_cast<std::uintptr_t>(s) | kStateBit);
    ++pending_cqes_;
    link_armed(s);
}

void Reactor::link_armed(PollState* s) noexcept {
    s->in_kernel_ = true;
    s->prev_armed_ = nullptr;
    s->next_armed_ = armed_;
    if (armed_ != nullptr) armed_->prev_armed_ = s;
    armed_ = s;
    ++polled_;  // poll_event() takes it off again, when the poll ends
}

void Reactor::cancel_poll(PollState* s) {
    if (epoll_ != nullptr) {
        epoll_cancel_poll(s);
        return;
    }
    if (s->in_kernel_) {
        io_uring_sqe* sqe = next_sqe();
        io_uring_prep_cancel64(sqe, reinterpret_cast<std::uintptr_t>(s) | kStateBit, 0);
        io_uring_sqe_set_data64(sqe, kIgnoreTag);
        ++pending_cqes_;
    }
    s->release();  // the node's reference
}

void Reactor::poll_event(PollState* s, std::int32_t res, bool more) {
    if (!more) {
        s->in_kernel_ = false;
        (s->prev_armed_ != nullptr ? s->prev_armed_->next_armed_ : armed_) = s->next_armed_;
        if (s->next_armed_ != nullptr) s->next_armed_->prev_armed_ = s->prev_armed_;
        s->prev_armed_ = s->next_armed_ = nullptr;
        --polled_;
        if (res == -EINVAL && multishot_poll_) {
            // A kernel without multishot polls (before 5.13): from now on one-shot polls,
            // armed again by the next waiter (on_event wakes every waiter below).
            multishot_poll_ = false;
        }
    }
    s->on_event(res, more, ready_);
    if (!more) s->release();  // the armed poll's reference
}

void Reactor::start_io(IoOperation* op) {
    if (epoll_ != nullptr) {
        epoll_start_io(op);
        return;
    }
    const bool linked = op->deadline_ns != kNoDeadline;
    io_uring_sqe* sqe = linked ? next_linked_sqe() : next_sqe();
    switch (op->io) {
    case IoKind::kRead:
        io_uring_prep_read(sqe, op->fd, op->addr, op->len, op->offset);
        break;
    case IoKind::kWrite:
        io_uring_prep_write(sqe, op->fd, op->addr, op->len, op->offset);
        break;
    case IoKind::kRecv:
        io_uring_prep_recv(sqe, op->fd, op->addr, op->len, static_cast<int>(op->op_flags));
        break;
    case IoKind::kSend:
        io_uring_prep_send(sqe, op->fd, op->addr, op->len, static_cast<int>(op->op_flags | MSG_NOSIGNAL));
        break;
    case IoKind::kAccept:
        io_uring_prep_accept(sqe, op->fd, static_cast<sockaddr*>(op->addr),
                             reinterpret_cast<socklen_t*>(static_cast<std::uintptr_t>(op->offset)),
                             static_cast<int>(op->op_flags));
        break;
    case IoKind::kConnect:
        io_uring_prep_connect(sqe, op->fd, static_cast<const sockaddr*>(op->addr), op->len);
        break;
    case IoKind::kRecvMsg:
        io_uring_prep_recvmsg(sqe, op->fd, static_cast<msghdr*>(op->addr), op->op_flags);
        break;
    case IoKind::kSendMsg:
        io_uring_prep_sendmsg(sqe, op->fd, static_cast<const msghdr*>(op->addr), op->op_flags | MSG_NOSIGNAL);
        break;
    case IoKind::kFsync:
        io_uring_prep_fsync(sqe, op->fd, op->op_flags);
        break;
    case IoKind::kOpenAt:
        io_uring_prep_openat(sqe, op->fd, static_cast<const char*>(op->addr), static_cast<int>(op->op_flags), op->len);
        break;
    case IoKind::kOpenAt2:
        io_uring_prep_openat2(sqe, op->fd, static_cast<const char*>(op->addr),
                              reinterpret_cast<open_how*>(static_cast<std::uintptr_t>(op->offset)));
        break;
    case IoKind::kPoll:
        io_uring_prep_poll_add(sqe, op->fd, op->len);
        break;
    case IoKind::kReadv:
        io_uring_prep_readv(sqe, op->fd, static_cast<const iovec*>(op->addr), op->len, op->offset);
        break;
    case IoKind::kWritev:
        io_uring_prep_writev(sqe, op->fd, static_cast<const iovec*>(op->addr), op->len, op->offset);
        break;
    // File-system operations (eddy/fs): fd is the directory (AT_FDCWD), addr the path.
    case IoKind::kStatx:
        io_uring_prep_statx(sqe, op->fd, static_cast<const char*>(op->addr), static_cast<int>(op->op_flags), op->len,
                            reinterpret_cast<struct statx*>(static_cast<std::uintptr_t>(op->offset)));
        break;
    case IoKind::kRenameAt:
        io_uring_prep_renameat(sqe, op->fd, static_cast<const char*>(op->addr), op->fd,
                               reinterpret_cast<const char*>(static_cast<std::uintptr_t>(op->offset)), op->op_flags);
        break;
    case IoKind::kUnlinkAt:
        io_uring_prep_unlinkat(sqe, op->fd, static_cast<const char*>(op->addr), static_cast<int>(op->op_flags));
        break;
    case IoKind::kMkdirAt:
        io_uring_prep_mkdirat(sqe, op->fd, static_cast<const char*>(op->addr), op->len);
        break;
    case IoKind::kWaitId:  // by hand: liburing 2.3 has no io_uring_prep_waitid (reactor.hpp)
        io_uring_prep_rw(kOpWaitId, sqe, op->fd, nullptr, static_cast<unsigned>(P_PIDFD), 0);
        sqe->file_index = op->op_flags;
        sqe->addr2 = reinterpret_cast<std::uintptr_t>(op->addr);
        break;
    }
    // The worker's own attempt just found the socket not ready: have the kernel wait for
    // readiness instead of trying (and failing) once more.
    if (op->poll_first) sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
    io_uring_sqe_set_data64(sqe, reinterpret_cast<std::uintptr_t>(op));
    if (linked) link_deadline(sqe, op);
    op->stage = Operation::Stage::kInFlight;
    ++pending_cqes_;
}

void Reactor::submit_poll(IoOperation* op) {
    if (epoll_ != nullptr) {
        epoll_wait_ready(op);
        return;
    }
    const bool for_write = waits_for_write(op->io);
    const bool linked = op->deadline_ns != kNoDeadline;
    io_uring_sqe* sqe = linked ? next_linked_sqe() : next_sqe();
    io_uring_prep_poll_add(sqe, op->fd, for_write ? POLLOUT : POLLIN);
    io_uring_sqe_set_data64(sqe, reinterpret_cast<std::uintptr_t>(op) | kPollBit);
    if (linked) link_deadline(sqe, op);
    ++pending_cqes_;
}

void Reactor::start_cancel(Operation* op) {
    if (epoll_ != nullptr) {
        epoll_cancel(op);
        return;
    }
    const std::uint64_t target =
        reinterpret_cast<std::uintptr_t>(op) | (op->stage == Operation::Stage::kPolling ? kPollBit : 0);
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_cancel64(sqe, target, 0);
    io_uring_sqe_set_data64(sqe, kIgnoreTag);
    ++pending_cqes_;
}

void Reactor::handle_cqe(std::uint64_t user_data, std::int32_t res, std::uint32_t flags) {
    const bool more = (flags & IORING_CQE_F_MORE) != 0;  // a multishot request goes on
    if (!more) --pending_cqes_;
    stat_completions_.add();
    if (user_data == kWakeTag) {
        wake_armed_ = false;  // re-armed by run(), which may take an SQE
        return;
    }
    if (user_data == kIgnoreTag || user_data == kLinkTimeoutTag) return;  // -ETIME: see deadline_result()
    if ((user_data & kStateBit) != 0) {
        poll_event(reinterpret_cast<PollState*>(user_data & ~kStateBit), res, more);
        return;
    }
    auto* op = reinterpret_cast<IoOperation*>(user_data & ~kPollBit);
    if (res == -ECANCELED) res = deadline_result(*op, res);  // its link timeout fired?
    if ((user_data & kPollBit) != 0) {
        // The descriptor is ready (or the poll failed): resubmit the operation itself.
        if (op->cancel_arrived) {
            complete(op, -ECANCELED);
        } else if (res < 0 && res != -EINTR) {
            complete(op, res);
        } else {
            op->stage = Operation::Stage::kQueued;
            op->next = retry_;
            retry_ = op;
        }
        return;
    }
    if ((res == -EINTR || (res == -EAGAIN && pollable(op->io))) && !op->cancel_arrived) {
        // -EINTR: resubmit. -EAGAIN: the caller's descriptor is non-blocking and not ready;
        // wait for readiness first.
        op->stage = res == -EAGAIN ? Operation::Stage::kPolling : Operation::Stage::kQueued;
        op->next = retry_;
        retry_ = op;
        return;
    }
    // Cancelled while it was being retried or interrupted: report the cancellation.
    if (op->cancel_arrived && (res == -EINTR || res == -EAGAIN)) res = -ECANCELED;
    complete(op, res);
}

void Reactor::complete(IoOperation* op, std::int32_t result) {
    untrack(op);
    // A child's wait lasts as long as the child runs: a lifetime, not an I/O latency.
    if (time_io_ && op->io != IoKind::kWaitId) {
        const std::int64_t took = clock_ns_ - op->taken_ns;
        io_latency_[static_cast<std::size_t>(latency_kind(op->io))].record_ns(
            took > 0 ? static_cast<std::uint64_t>(took) : 0);
    }
    op->result = result;
    op->stage = Operation::Stage::kDone;
    // Acq_rel: pairs with request_cancel()'s fetch_or. If a cancel was requested first, its
    // node is on the way: the frame resumes when it arrives (see operation.hpp).
    const std::uint8_t prev = op->cancel_flags.fetch_or(Operation::kCompleted, std::memory_order_acq_rel);
    if ((prev & Operation::kCancelRequested) != 0 && !op->cancel_arrived) {
        op->stage = Operation::Stage::kAwaitingCancel;
        return;
    }
    ready_.push_back(op->waiter.address());
}

}  // namespace eddy::detail
