// io/reactor/reactor_epoll_ops.cpp: the readiness driver's operations (the map is the prologue of
// reactor_epoll.cpp): an operation's non-blocking attempt, its wait for readiness, its trip to the
// file pool and back, its cancellation and its deadline. Reactor thread only.
#include "reactor/reactor.hpp"

#include "reactor/epoll_state.hpp"
#include "time/timer_queue.hpp"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <eddy/runtime/detail/clock.hpp>

#include <cerrno>

namespace eddy::detail {

using namespace epoll;

namespace {

bool is_socket_call(IoKind k) noexcept {
    return k == IoKind::kRecv || k == IoKind::kSend || k == IoKind::kRecvMsg || k == IoKind::kSendMsg;
}

/// A read or write of a blocking descriptor that does not block: RWF_NOWAIT (pipes take it;
/// -EOPNOTSUPP where the descriptor does not).
ssize_t rw_nowait(const IoOperation& op) noexcept {
    iovec one{op.addr, op.len};
    const bool vectored = op.io == IoKind::kReadv || op.io == IoKind::kWritev;
    const auto* iov = vectored ? static_cast<const iovec*>(op.addr) : &one;
    const int n = vectored ? static_cast<int>(op.len) : 1;
    const off_t off = op.offset == ~std::uint64_t{0} ? -1 : static_cast<off_t>(op.offset);
    return op.io == IoKind::kRead || op.io == IoKind::kReadv ? ::preadv2(op.fd, iov, n, off, RWF_NOWAIT)
                                                             : ::pwritev2(op.fd, iov, n, off, RWF_NOWAIT);
}

/// One attempt that does not block: the socket calls carry MSG_DONTWAIT, a read or write of
/// a blocking descriptor RWF_NOWAIT (`nowait`), and the rest rely on the descriptor's mode
/// or on readiness just seen. A count, a descriptor or 0, or -errno (-EAGAIN: not ready).
std::int32_t attempt(const IoOperation& op, bool nowait) noexcept {
    for (;;) {
        ssize_t r;
        const int flags = static_cast<int>(op.op_flags);
        switch (op.io) {
        case IoKind::kRecv:
            r = ::recv(op.fd, op.addr, op.len, flags | MSG_DONTWAIT);
            break;
        case IoKind::kSend:
            r = ::send(op.fd, op.addr, op.len, flags | MSG_DONTWAIT | MSG_NOSIGNAL);
            break;
        case IoKind::kRecvMsg:
            r = ::recvmsg(op.fd, static_cast<msghdr*>(op.addr), flags | MSG_DONTWAIT);
            break;
        case IoKind::kSendMsg:
            r = ::sendmsg(op.fd, static_cast<const msghdr*>(op.addr), flags | MSG_DONTWAIT | MSG_NOSIGNAL);
            break;
        case IoKind::kAccept:
            r = ::accept4(op.fd, static_cast<sockaddr*>(op.addr),
                          reinterpret_cast<socklen_t*>(static_cast<std::uintptr_t>(op.offset)), flags);
            break;
        default:  // read, write, readv, writev on a pollable descriptor
            if (!nowait) return FilePool::call(op);
            r = rw_nowait(op);
            break;
        }
        if (r >= 0) return static_cast<std::int32_t>(r);
        if (errno != EINTR) return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    }
}

}  // namespace

// --- operations ----------------------------------------------------------------------------

void Reactor::epoll_start_io(IoOperation* op) {
    if (FilePool::always_pooled(op->io)) {
        epoll_to_pool(op);
        return;
    }
    switch (op->io) {
    case IoKind::kPoll:
        epoll_wait_ready(op);
        return;
    case IoKind::kWaitId:  // not offered here (reactor_has_waitid() is false)
        complete(op, -EOPNOTSUPP);
        return;
    case IoKind::kConnect:
        epoll_connect(op);
        return;
    case IoKind::kRead:
    case IoKind::kWrite:
    case IoKind::kReadv:
    case IoKind::kWritev: {
        struct stat st {};
        if (::fstat(op->fd, &st) != 0) {
            complete(op, -errno);
            return;
        }
        if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode) || S_ISDIR(st.st_mode)) {
            epoll_to_pool(op);
            return;
        }
        break;
    }
    default:
        break;
    }
    // A socket call, an accept, or a read or write of a pollable descriptor.
    const bool ready_seen = op->driver_step == kStepReadySeen;
    op->driver_step = kStepNone;
    if (op->poll_first) {  // the worker's own attempt just found it not ready
        op->poll_first = false;
        epoll_wait_ready(op);
        return;
    }
    bool nowait = false;
    if (!is_socket_call(op->io)) {
        // On a blocking descriptor the call would wait here, on the reactor thread. A read or
        // write tries with RWF_NOWAIT first (pipes take it); where the descriptor does not (a
        // FIFO opened by name, a tty), and for an accept, it waits for readiness and then
        // makes the call, which readiness says will not wait (a write to a FIFO is cut to
        // PIPE_BUF bytes, which a writable pipe always takes: it may come back short).
        const int fl = ::fcntl(op->fd, F_GETFL);
        if (fl < 0) {
            complete(op, -errno);
            return;
        }
        if ((fl & O_NONBLOCK) == 0 && !ready_seen) {
            if (op->io == IoKind::kAccept) {
                epoll_wait_ready(op);
                return;
            }
            nowait = true;
        }
        if ((fl & O_NONBLOCK) == 0 && ready_seen && op->io == IoKind::kWrite && op->len > PIPE_BUF) {
            op->len = PIPE_BUF;  // the caller's write loop sends the rest
        }
    }
    const std::int32_t r = attempt(*op, nowait);
    if (r == -EAGAIN || (r == -EOPNOTSUPP && nowait)) {
        epoll_wait_ready(op);  // where epoll refuses the descriptor too, the pool makes the call
    } else {
        complete(op, r);
    }
}

void Reactor::epoll_connect(IoOperation* op) {
    if (op->driver_step == kStepConnecting) {  // writable: the handshake has ended
        op->driver_step = kStepNone;
        int err = 0;
        socklen_t len = sizeof err;
        if (::getsockopt(op->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        complete(op, -err);
        return;
    }
    // io_uring's connect waits for the handshake in the kernel; here the socket must not
    // block the reactor thread. eddy's streams make their sockets non-blocking anyway.
    const int fl = ::fcntl(op->fd, F_GETFL);
    if (fl < 0 || ((fl & O_NONBLOCK) == 0 && ::fcntl(op->fd, F_SETFL, fl | O_NONBLOCK) != 0)) {
        complete(op, -errno);
        return;
    }
    if (::connect(op->fd, static_cast<const sockaddr*>(op->addr), op->len) == 0) {
        complete(op, 0);
        return;
    }
    if (errno != EINPROGRESS && errno != EINTR) {  // EINTR: the handshake goes on, as EINPROGRESS
        complete(op, -errno);
        return;
    }
    op->driver_step = kStepConnecting;
    epoll_wait_ready(op);
}

void Reactor::epoll_wait_ready(IoOperation* op) {
    FdWatch& w = epoll_->watches[op->fd];
    op->next = w.waiters;
    w.waiters = op;
    op->stage = Operation::Stage::kPolling;
    ++pending_cqes_;
    if (op->deadline_ns != kNoDeadline) epoll_->deadlines.emplace(op->deadline_ns, op);
    const int err = epoll_register(op->fd, w);
    if (err == 0) return;
    epoll_unlink(op);
    if (err != EPERM) {
        complete(op, -err);
    } else if (op->io == IoKind::kPoll) {
        // Not pollable (a regular file, /dev/null): always ready, as poll(2) says.
        complete(op, static_cast<std::int32_t>(wanted(*op) & (POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM)));
    } else {
        epoll_to_pool(op);  // the call itself may block: not here
    }
}

void Reactor::epoll_unlink(IoOperation* op) noexcept {
    --pending_cqes_;
    if (op->deadline_ns != kNoDeadline) epoll_->deadlines.erase({op->deadline_ns, op});
    const auto it = epoll_->watches.find(op->fd);
    if (it == epoll_->watches.end()) return;
    for (ReactorNode** link = reinterpret_cast<ReactorNode**>(&it->second.waiters); *link != nullptr;
         link = &(*link)->next) {
        if (*link == op) {
            *link = op->next;
            break;
        }
    }
    epoll_forget_if_unused(op->fd);
}

void Reactor::epoll_to_pool(IoOperation* op) {
    op->stage = Operation::Stage::kInFlight;
    op->driver_step = kStepPooled;
    ++pending_cqes_;
    ++pooled_;
    if (op->deadline_ns != kNoDeadline) epoll_->deadlines.emplace(op->deadline_ns, op);
    stat_submissions_.add();
    try {
        epoll_->pool.run(op);
    } catch (const std::system_error& e) {  // no thread could be started, and none exists
        epoll_pool_done(op, -e.code().value());
    }
}

void Reactor::epoll_pool_done(IoOperation* op, std::int32_t result) {
    op->driver_step = kStepNone;
    --pending_cqes_;
    --pooled_;
    if (op->deadline_ns != kNoDeadline) epoll_->deadlines.erase({op->deadline_ns, op});
    stat_completions_.add();
    complete(op, result);
}

bool Reactor::epoll_pool_returned(IoOperation* op) {
    if (op->driver_step != kStepPooled) return false;
    if (time_io_) clock_ns_ = steady_now_ns();
    epoll_pool_done(op, op->result);  // written by the pool thread before it posted op
    return true;
}

void Reactor::epoll_cancel(Operation* base) {
    auto* op = static_cast<IoOperation*>(base);
    if (op->stage == Operation::Stage::kPolling) {
        epoll_unlink(op);
        complete(op, -ECANCELED);
    } else if (op->stage == Operation::Stage::kInFlight && epoll_->pool.withdraw(op)) {
        epoll_pool_done(op, -ECANCELED);
    }
    // Started on the pool: it runs to its end and its result stands (as a file read in
    // io_uring's workers does); cancel_arrived makes complete() resume it at once.
}

void Reactor::epoll_fire_deadlines() {
    if (epoll_->deadlines.empty()) return;
    const std::int64_t now = steady_now_ns();
    while (!epoll_->deadlines.empty() && epoll_->deadlines.begin()->first <= now) {
        IoOperation* op = epoll_->deadlines.begin()->second;
        epoll_->deadlines.erase(epoll_->deadlines.begin());
        if (op->stage == Operation::Stage::kPolling) {
            epoll_unlink(op);
            complete(op, kDeadlineResult);
        } else if (op->stage == Operation::Stage::kInFlight && epoll_->pool.withdraw(op)) {
            epoll_pool_done(op, kDeadlineResult);
        }
    }
}

std::int64_t Reactor::epoll_earliest_deadline() const noexcept {
    return epoll_->deadlines.empty() ? TimerQueue::kNone : epoll_->deadlines.begin()->first;
}

}  // namespace eddy::detail
