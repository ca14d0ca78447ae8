// io/reactor/reactor_epoll.cpp: the readiness driver, the reactor's second kernel interface
// (RuntimeConfig::driver; where the kernel refuses io_uring). The reactor's loop, inbox,
// timers, sleep protocol, hand-over and cancel protocol are the same for both drivers
// (reactor.hpp); this file is what replaces the ring:
//
//   socket polls (PollState)   an edge-triggered registration for IN, OUT, RDHUP, PRI: each
//                              event is one of the multishot poll's completions; close()'s
//                              cancel removes it and ends the poll with -ECANCELED
//   kPoll (readable/writable)  a one-shot wait on the descriptor's registration
//   recv, send, recvmsg,       a non-blocking attempt on the reactor thread (MSG_DONTWAIT);
//   sendmsg, accept            not ready: a one-shot wait, then the attempt again
//   connect                    O_NONBLOCK, connect(2), and on EINPROGRESS a wait for
//                              writability, then SO_ERROR
//   read, write, readv, writev on a pipe, socket, tty or other pollable descriptor: as recv
//                              (a blocking descriptor is tried with RWF_NOWAIT, or where it
//                              does not take that, waited on for readiness before the call);
//                              on a regular file or a block device: the file pool
//   fsync, openat, statx,      the file pool (file_pool.hpp): threads that make the call
//   renameat, unlinkat, mkdirat
//   waitid                     never asked for: reactor_has_waitid() is false here, and a
//                              child's wait polls its pidfd instead (io/process/child.cpp)
//   deadlines (with_deadline)  the reactor's own list instead of linked timeouts: at the
//                              deadline a waiting operation is taken back (from epoll, or from
//                              the pool's queue) and completes with kDeadlineResult; one that a
//                              pool thread has started runs to its end and keeps its result
//   wake-ups                   the same eventfd, registered in the epoll set
//
// What differs from io_uring, as a program sees it: a blocking descriptor that does not take
// RWF_NOWAIT (a FIFO opened by name, a tty), and a blocking listener, is waited on for
// readiness before the call, so a reader that loses a race for the data blocks the reactor
// thread until more comes (eddy's own descriptors are non-blocking or take RWF_NOWAIT), and a
// write to it may come back short (at most PIPE_BUF bytes); a file operation that has
// started on the pool is not interrupted by cancellation or a deadline, and one that blocks
// for good (the open of a FIFO nobody opens) holds a pool thread, of which there are 16, and
// a paused clock; and ReactorMetrics counts epoll_ctl calls as submissions and events as
// completions.
#include "reactor/reactor.hpp"

#include "reactor/epoll_state.hpp"
#include "reactor/poll_state.hpp"
#include "time/timer_queue.hpp"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <eddy/runtime/detail/clock.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace eddy::detail {

namespace {

/// epoll_event.data of the wake-up eventfd (a descriptor's is its number, never this).
constexpr std::uint64_t kWakeData = ~std::uint64_t{0};
/// What a socket's standing poll waits for: the io_uring driver's multishot poll mask.
constexpr std::uint32_t kStateEvents = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI;
/// Always reported, asked or not.
constexpr std::uint32_t kAlways = EPOLLERR | EPOLLHUP;

// IoOperation::driver_step values (operation.hpp).
constexpr std::uint8_t kStepNone = 0;
constexpr std::uint8_t kStepReadySeen = 1;   // readiness came: a blocking listener's accept may go
constexpr std::uint8_t kStepConnecting = 2;  // connect(2) said EINPROGRESS: SO_ERROR after readiness
constexpr std::uint8_t kStepPooled = 3;      // on the file pool; back in the inbox when done

bool writes(IoKind k) noexcept {
    return k == IoKind::kWrite || k == IoKind::kWritev || k == IoKind::kSend || k == IoKind::kSendMsg ||
           k == IoKind::kConnect;
}

/// What a one-shot waiter waits for.
std::uint32_t wanted(const IoOperation& op) noexcept {
    if (op.io == IoKind::kPoll) return op.len;
    return writes(op.io) ? EPOLLOUT : EPOLLIN;
}

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

Reactor::Reactor(DriverHost& host, ReadinessDriver, std::string note)
    : host_(host), virtual_(host.clock_is_virtual()), time_io_(host.config().io_latency_histogram),
      driver_note_(std::move(note)) {
    epoll_ = std::make_unique<EpollState>(*this, host.thread_name("io"));
    epoll_->fd = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_->fd < 0) throw_errno("eddy: epoll_create1 for the reactor");
    event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (event_fd_ < 0) {
        const int err = errno;
        ::close(epoll_->fd);
        throw std::system_error(err, std::system_category(), "eddy: eventfd for the reactor");
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    ev.data.u64 = kWakeData;
    if (::epoll_ctl(epoll_->fd, EPOLL_CTL_ADD, event_fd_, &ev) != 0) {
        const int err = errno;
        ::close(event_fd_);
        ::close(epoll_->fd);
        throw std::system_error(err, std::system_category(), "eddy: epoll_ctl for the reactor's eventfd");
    }
    init_queues();
}

// --- registrations -------------------------------------------------------------------------

int Reactor::epoll_register(int fd, FdWatch& w) noexcept {
    std::uint32_t want = w.state != nullptr ? kStateEvents : 0;
    for (IoOperation* op = w.waiters; op != nullptr; op = static_cast<IoOperation*>(op->next)) want |= wanted(*op);
    epoll_event ev{};
    ev.events = want | EPOLLET;
    ev.data.u64 = static_cast<std::uint32_t>(fd);
    stat_submissions_.add();
    // MOD even when the interest is the same: the kernel then looks at the descriptor's
    // readiness again, so that a new waiter hears of readiness that came before it.
    int how = w.events == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
    for (int tries = 0; tries < 2; ++tries) {
        if (::epoll_ctl(epoll_->fd, how, fd, &ev) == 0) {
            w.events = want;
            return 0;
        }
        // The table and the kernel disagree: the descriptor was closed (which ends its
        // registration) and its number reused, or registered by a waiter that has left.
        if (errno == ENOENT) how = EPOLL_CTL_ADD;
        else if (errno == EEXIST) how = EPOLL_CTL_MOD;
        else break;
    }
    return errno;
}

void Reactor::epoll_forget_if_unused(int fd) noexcept {
    const auto it = epoll_->watches.find(fd);
    if (it == epoll_->watches.end() || it->second.state != nullptr || it->second.waiters != nullptr) return;
    if (it->second.events != 0) ::epoll_ctl(epoll_->fd, EPOLL_CTL_DEL, fd, nullptr);  // ENOENT: closed already
    epoll_->watches.erase(it);
}

// --- socket polls --------------------------------------------------------------------------

void Reactor::epoll_arm_poll(PollState* s) {
    if (!s->begin_arm()) {  // closed before we got here
        s->release();       // the node's reference
        return;
    }
    // The node's reference is the poll's now, until it ends (epoll_end_poll).
    s->in_kernel_ = true;
    s->prev_armed_ = nullptr;
    s->next_armed_ = armed_;
    if (armed_ != nullptr) armed_->prev_armed_ = s;
    armed_ = s;
    ++polled_;
    ++pending_cqes_;
    FdWatch& w = epoll_->watches[s->fd()];
    w.state = s;
    if (const int err = epoll_register(s->fd(), w); err != 0) {
        // EPERM: epoll cannot wait on this descriptor (a regular file, /dev/null): it is
        // always ready, as poll(2) says of it. Anything else is the poll's error.
        epoll_end_poll(s, err == EPERM ? static_cast<std::int32_t>(POLLIN | POLLOUT) : -err);
    }
}

void Reactor::epoll_cancel_poll(PollState* s) {
    if (s->in_kernel_) epoll_end_poll(s, -ECANCELED);
    s->release();  // the node's reference
}

void Reactor::epoll_end_poll(PollState* s, std::int32_t res) {
    if (const auto it = epoll_->watches.find(s->fd()); it != epoll_->watches.end() && it->second.state == s) {
        it->second.state = nullptr;
        epoll_forget_if_unused(s->fd());
    }
    --pending_cqes_;
    poll_event(s, res, false);  // the poll is over: every waiter is woken, the poll's reference dropped
}

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

// --- events --------------------------------------------------------------------------------

int Reactor::epoll_collect(std::int64_t bound_ns) {
    epoll_event events[64];
    int n = -1;
    if (epoll_->pwait2) {
        timespec ts{};
        if (bound_ns >= 0) {
            ts.tv_sec = bound_ns / 1'000'000'000;
            ts.tv_nsec = bound_ns % 1'000'000'000;
        }
        n = ::epoll_pwait2(epoll_->fd, events, 64, bound_ns >= 0 ? &ts : nullptr, nullptr);
        if (n < 0 && errno == ENOSYS) epoll_->pwait2 = false;  // before Linux 5.11, or a filter
    }
    if (!epoll_->pwait2) {
        const int ms = bound_ns < 0 ? -1 : static_cast<int>((bound_ns + 999'999) / 1'000'000);
        n = ::epoll_wait(epoll_->fd, events, 64, ms);
    }
    if (n < 0) {
        if (errno != EINTR) std::fprintf(stderr, "eddy: reactor: epoll_wait failed: %s\n", std::strerror(errno));
        return 0;
    }
    if (time_io_ && n > 0) clock_ns_ = steady_now_ns();
    for (int i = 0; i < n; ++i) epoll_dispatch(events[i].data.u64, events[i].events);
    return n;
}

void Reactor::epoll_dispatch(std::uint64_t data, std::uint32_t events) {
    stat_completions_.add();
    if (data == kWakeData) {
        if (wake_armed_) {  // as the io_uring driver's eventfd read completing (arm_wake)
            wake_armed_ = false;
            --pending_cqes_;
        }
        std::uint64_t count = 0;
        while (::read(event_fd_, &count, sizeof count) > 0) {
        }
        return;
    }
    const int fd = static_cast<int>(data);
    const auto it = epoll_->watches.find(fd);
    if (it == epoll_->watches.end()) return;  // every waiter left since
    FdWatch& w = it->second;
    if (w.state != nullptr && (events & (kStateEvents | kAlways)) != 0)
        poll_event(w.state, static_cast<std::int32_t>(events), true);
    for (ReactorNode** link = reinterpret_cast<ReactorNode**>(&w.waiters); *link != nullptr;) {
        auto* op = static_cast<IoOperation*>(*link);
        const std::uint32_t got = events & (wanted(*op) | kAlways);
        if (got == 0) {
            link = &op->next;
            continue;
        }
        *link = op->next;
        --pending_cqes_;
        if (op->deadline_ns != kNoDeadline) epoll_->deadlines.erase({op->deadline_ns, op});
        if (op->io == IoKind::kPoll) {
            complete(op, static_cast<std::int32_t>(got));
        } else {  // ready: the operation itself is attempted again (run()'s retries)
            if (op->driver_step != kStepConnecting) op->driver_step = kStepReadySeen;
            op->stage = Operation::Stage::kQueued;
            op->next = retry_;
            retry_ = op;
        }
    }
    epoll_forget_if_unused(fd);
}

void Reactor::epoll_reap() {
    while (epoll_collect(0) == 64) {
    }
}

// --- shutdown ------------------------------------------------------------------------------

void Reactor::epoll_drain() noexcept {
    // As drain_for_shutdown(): every worker is joined. Nothing waiting in epoll holds a
    // buffer, so only the pool's running calls must end before the frames go.
    drop_inbox();
    retry_ = nullptr;
    for (auto& q : timer_queues_) q->clear();
    epoll_->pool.shutdown();  // queued ones never run; running ones post to the inbox
    std::vector<PollState*> polls;
    for (PollState* s = armed_; s != nullptr; s = s->next_armed_) polls.push_back(s);
    for (PollState* s : polls) epoll_end_poll(s, -ECANCELED);
    for (auto& [fd, w] : epoll_->watches)
        if (w.events != 0) ::epoll_ctl(epoll_->fd, EPOLL_CTL_DEL, fd, nullptr);
    epoll_->watches.clear();
    epoll_->deadlines.clear();
    ready_.clear();  // never resumed: the scheduler destroys these frames
    drop_inbox();    // close()'s poll cancels, the pool's last completions
    in_flight_ = nullptr;
    pending_cqes_ = 0;
    pooled_ = 0;
    publish_gauges();
}

}  // namespace eddy::detail
