// io/reactor/io_awaiter.cpp: the out-of-line parts of eddy/io/detail/io_awaiter.hpp.
#include <eddy/io/detail/io_awaiter.hpp>

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

namespace eddy::detail {

void close_unclaimed(const IoOperation& op) noexcept {
    // The reactor wrote stage and result before the frame was queued or, at shutdown, before
    // its thread was joined: both happen before this destructor.
    const bool completed = op.stage == Operation::Stage::kDone || op.stage == Operation::Stage::kAwaitingCancel;
    if (completed && op.result >= 0) ::close(op.result);
}

namespace {

// One non-blocking attempt of `op`, retried on EINTR: the count, or -errno.
ssize_t attempt(const IoOperation& op) noexcept {
    switch (op.io) {
    case IoKind::kSend:
        return ::send(op.fd, op.addr, op.len, MSG_DONTWAIT | MSG_NOSIGNAL);
    case IoKind::kRecv:
        return ::recv(op.fd, op.addr, op.len, MSG_DONTWAIT);
    case IoKind::kReadv: {
        const off_t off = op.offset == ~std::uint64_t{0} ? -1 : static_cast<off_t>(op.offset);
        return ::preadv2(op.fd, static_cast<const iovec*>(op.addr), static_cast<int>(op.len), off, RWF_NOWAIT);
    }
    default: {  // kRead; offset ~0 is -1 as off_t: the current file position, as read(2)
        iovec iov{op.addr, op.len};
        const off_t off = op.offset == ~std::uint64_t{0} ? -1 : static_cast<off_t>(op.offset);
        return ::preadv2(op.fd, &iov, 1, off, RWF_NOWAIT);
    }
    }
}

bool would_block(int err) noexcept { return err == EAGAIN || err == EWOULDBLOCK; }

}  // namespace

bool try_now(IoOperation& op) noexcept {
    if (op.io != IoKind::kSend && op.io != IoKind::kRecv && op.io != IoKind::kRead && op.io != IoKind::kReadv)
        return false;
    ssize_t n;
    while ((n = attempt(op)) < 0 && errno == EINTR) {
    }
    if (n >= 0) {
        op.result = static_cast<std::int32_t>(n);
        return true;
    }
    const int err = errno;
    op.result = -err;
    if (op.io == IoKind::kRead || op.io == IoKind::kReadv)
        return !would_block(err) && err != EOPNOTSUPP;  // no NOWAIT support
    // A socket that is not ready: the kernel should wait for readiness before trying again.
    op.poll_first = would_block(err);
    return !op.poll_first;
}

}  // namespace eddy::detail
