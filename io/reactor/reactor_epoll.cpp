// io/reactor/reactor_epoll.cpp: the readiness driver, the reactor's second kernel interface
// (RuntimeConfig::driver; where the kernel refuses io_uring). The reactor's loop, inbox,
// timers, sleep protocol, hand-over and cancel protocol are the same for both drivers
// (reactor.hpp); this file and reactor_epoll_ops.cpp (the operations) replace the ring:
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

}  // namespace

using namespace epoll;

Reactor::Reactor(DriverHost& host, ReadinessDriver, std::string note)
    : host_(host), virtual_(host.clock_is_virtual()), time_io_(host.config().io_latency_histogram),
      driver_note_(std::move(note)) {
    epoll_ = std::make_unique<EpollState>(*this, host.thread_name("io"), host.config());
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
    link_armed(s);
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
