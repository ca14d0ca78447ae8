// io/net/socket_io.cpp: the out-of-line parts of eddy/net/detail/socket_io.hpp.
#include <eddy/net/detail/socket_io.hpp>

#include "reactor/poll_state.hpp"
#include "reactor/reactor.hpp"

#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

#include <eddy/time/detail/deadline.hpp>
#include <eddy/io/detail/operation.hpp>

namespace eddy::detail {
void SocketIo::close() {
    if (fd_ < 0) return;
    // SHUT_RD first: it ends a read or accept that waits in another task (it returns 0 or
    // fails with EINVAL) without sending anything, so close(2) still decides what the peer
    // sees (FIN, or RST with SO_LINGER 0). ENOTCONN for a socket never connected: ignored.
    ::shutdown(fd_, SHUT_RD);
    if (PollState* s = state_.exchange(nullptr, std::memory_order_acq_rel)) {
        fd_ = -1;
        s->close();  // closes the descriptor once the reactor and every retry let go
        return;
    }
    io::FileDescriptor(std::exchange(fd_, -1)).close();
}

void SocketIo::release() noexcept {
    if (PollState* s = state_.exchange(nullptr, std::memory_order_acq_rel)) {
        fd_ = -1;
        s->close();
    } else if (fd_ >= 0) {
        ::close(std::exchange(fd_, -1));
    }
}

void SocketIo::make_nonblocking(const char* what) {
    if (nonblocking_.load(std::memory_order_relaxed)) return;
    const int fd = fd_;
    const int flags = fd < 0 ? (errno = EBADF, -1) : ::fcntl(fd, F_GETFL);
    if (flags < 0 || ((flags & O_NONBLOCK) == 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0))
        throw_io_error(-errno, what);
    nonblocking_.store(true, std::memory_order_relaxed);
}

bool SocketAwaiter::attempt() noexcept {
    tried_ = true;
    // Once waiting, the descriptor comes from the state, which keeps it open even if the
    // socket object was closed meanwhile.
    const int fd = state_ != nullptr ? state_->fd() : io_->fd_;
    ssize_t n;
    for (;;) {
        switch (op_) {
        case Op::kRecv:
            n = ::recv(fd, buf_, len_, MSG_DONTWAIT);
            break;
        case Op::kSend:
            n = ::send(fd, buf_, len_, MSG_DONTWAIT | MSG_NOSIGNAL);
            break;
        case Op::kSendAll:
            n = len_ == done_
                    ? 0
                    : ::send(fd, static_cast<std::byte*>(buf_) + done_, len_ - done_, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n >= 0 && (done_ += static_cast<std::size_t>(n)) < len_) continue;  // more to send
            if (n >= 0) n = static_cast<ssize_t>(len_);
            break;
        case Op::kSendFile: {
            // The socket is non-blocking (SocketIo::make_nonblocking). At most 1 GiB per
            // call, as sendfile(2) itself would cut it.
            const auto& range = *static_cast<const FileRange*>(buf_);
            auto off = static_cast<off_t>(range.offset + done_);
            n = len_ == done_ ? 0 : ::sendfile(fd, range.fd, &off, std::min<std::size_t>(len_ - done_, 1u << 30));
            if (n > 0 && (done_ += static_cast<std::size_t>(n)) < len_) continue;  // more to send
            if (n >= 0) n = static_cast<ssize_t>(done_);  // 0 from sendfile: the file ended first
            break;
        }
        case Op::kRecvMsg:
            n = ::recvmsg(fd, static_cast<msghdr*>(buf_), MSG_DONTWAIT);
            break;
        case Op::kPeek:
            n = ::recv(fd, buf_, len_, MSG_PEEK | MSG_DONTWAIT);
            break;
        case Op::kSendMsg:
            n = ::sendmsg(fd, static_cast<const msghdr*>(buf_), MSG_DONTWAIT | MSG_NOSIGNAL);
            break;
        default:
            n = ::accept4(fd, static_cast<sockaddr*>(buf_), addrlen_, SOCK_CLOEXEC);
            break;
        }
        if (n >= 0 || errno != EINTR) break;
    }
    if (n >= 0) {
        result_ = n;
        return true;
    }
    const int err = errno;
    result_ = -err;
    return err != EAGAIN && err != EWOULDBLOCK;
}

bool SocketAwaiter::suspend(std::coroutine_handle<> h, const TaskCancellation* scope) {
    StopState* task = scope != nullptr ? scope->get() : nullptr;
    if (token_.stop_requested() || stop_requested(task)) {
        result_ = -ECANCELED;
        return false;
    }
    const PollState::Dir d = dir_of(op_);
    PollState* s = io_->state_.load(std::memory_order_acquire);
    std::uint32_t seen = 0;
    Reactor* home = nullptr;  // this runtime's: looked up only once the operation waits
    bool try_again = false;   // our attempt came before the state we use: try under its protocol
    if (s != nullptr) {
        seen = s->word(d);
        if ((seen & PollState::kReady) != 0 && attempt()) {
            // A short read (or write) very probably emptied (filled) the socket buffer: the
            // next operation waits for an event instead of trying in vain.
            if (short_transfer()) s->clear_ready(d, seen);
            return false;
        }
    } else {
        if (attempt()) return false;
        // The first time this socket has to wait: give it a poll state on this runtime.
        if (io_->fd_ < 0) {  // closed, and attempt() did not notice (it always should)
            result_ = -EBADF;
            return false;
        }
        home = &current_reactor(what_);
        auto* fresh = new PollState(io_->fd_, *home);
        PollState* expected = nullptr;
        if (io_->state_.compare_exchange_strong(expected, fresh, std::memory_order_acq_rel)) {
            s = fresh;
            seen = s->word(d);  // new: the arm's first look at the socket covers our attempt
        } else {
            PollState::discard(fresh);  // another task installed one first: use that
            s = expected;
            try_again = true;  // an event it saw before we read its word must not be lost
        }
    }
    if (home == nullptr) home = &current_reactor(what_);
    frame_ = h;
    state_ = s;
    home_ = home;
    s->add_ref();  // ours, until the destructor
    // Under a deadline: a poll of its own, linked to the deadline (see socket_io.hpp).
    if (const std::int64_t deadline = io_deadline_of(scope); deadline != kNoDeadline) [[unlikely]]
        return wait_with_deadline(deadline, task);
    // Registered before queuing: a cancel either finds us queued or marks us so that we do
    // not queue (PollState::queue checks under its lock). A callback may run right here.
    if (token_.stop_possible()) own_cancel_ = new std::stop_callback<CancelWait>(token_, CancelWait{this});
    if (task != nullptr) attach(*task);
    if (try_again) return !settle_or_wait();
    switch (s->queue(this, d, seen)) {
    case PollState::Queue::kQueued:
        return true;  // the last touch: see settle_or_wait()
    case PollState::Queue::kSettled:
        return false;
    case PollState::Queue::kRetry:
        break;
    }
    return !settle_or_wait();
}

bool SocketAwaiter::settle_or_wait(bool woken) noexcept {
    PollState& s = *state_;
    const PollState::Dir d = dir_of(op_);
    // Closed meanwhile by another task: what close() promises, whatever the socket says.
    if (s.closed()) {
        result_ = closed_result(op_);
        return true;
    }
    for (;;) {
        const std::uint32_t seen = s.word(d);
        // readable() woken by a report that bytes came: believed without a peek, which would
        // be a second system call for the bytes the read after it takes anyway. The end of
        // the stream (kFinal) is peeked, to tell "bytes, then the end" (1) from "the end" (0).
        if (woken && op_ == Op::kPeek && (seen & (PollState::kReady | PollState::kFinal)) == PollState::kReady) {
            tried_ = true;
            result_ = 1;
            return true;
        }
        if ((seen & PollState::kReady) != 0 && attempt()) {
            if (short_transfer()) s.clear_ready(d, seen);
            return true;
        }
        switch (s.queue(this, d, seen)) {
        case PollState::Queue::kQueued:
            return false;  // from here on another thread may resume and destroy us
        case PollState::Queue::kSettled:
            return true;
        case PollState::Queue::kRetry:
            continue;
        }
    }
}

void SocketAwaiter::retry(Runnable* r) noexcept {
    auto* self = static_cast<SocketAwaiter*>(r);
    const std::coroutine_handle<> frame = self->frame_;
    if (self->settle_or_wait(true)) frame.resume();
}

void SocketAwaiter::CancelWait::operator()() const noexcept { self->state_->cancel(self); }

void SocketAwaiter::task_stopped(StopRegistration* r) noexcept { CancelWait{static_cast<SocketAwaiter*>(r)}(); }

std::size_t SocketAwaiter::await_resume() {
    delivered_ = true;
    if (result_ < 0) throw_io_error(static_cast<int>(result_), what_);
    return static_cast<std::size_t>(result_);
}

void SocketAwaiter::finish() noexcept {
    // The callbacks first: their destructors wait for a cancel running on another thread,
    // which uses the state.
    delete std::exchange(own_cancel_, nullptr);
    StopRegistration::reset();
    end_deadline_wait(deadline_wait_);  // its callbacks likewise; before the state goes
    deadline_wait_ = nullptr;
    if (state_ != nullptr) {
        state_->leave(this);
        state_->release();
        state_ = nullptr;
    }
    // An accepted connection nobody took (the frame was destroyed before it resumed).
    if (op_ == Op::kAccept && tried_ && !delivered_ && result_ >= 0) ::close(static_cast<int>(result_));
}

}  // namespace eddy::detail
