// io/io_error.cpp: how a failed operation reaches the awaiting task.
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>

#include <eddy/io/detail/io_awaiter.hpp>

namespace eddy::detail {

void throw_io_error(int negative_errno, const char* what) {
    throw std::system_error(-negative_errno, std::system_category(), what);
}

void close_unclaimed(const IoOperation& op) noexcept {
    // The reactor wrote stage and result before the frame was queued or, at shutdown, before
    // its thread was joined: both happen before this destructor.
    const bool completed = op.stage == Operation::Stage::kDone || op.stage == Operation::Stage::kAwaitingCancel;
    if (completed && op.result >= 0) ::close(op.result);
}

std::int32_t try_read(int fd, void* data, std::size_t len, std::uint64_t offset) noexcept {
    iovec iov{data, len};
    // offset ~0 is -1 as off_t: the current file position, as for read(2).
    const off_t off = offset == ~std::uint64_t{0} ? -1 : static_cast<off_t>(offset);
    for (;;) {
        const ssize_t n = ::preadv2(fd, &iov, 1, off, RWF_NOWAIT);
        if (n >= 0) return static_cast<std::int32_t>(n);
        if (errno != EINTR) return -errno;
    }
}

std::int32_t try_send(int fd, const void* data, std::size_t len) noexcept {
    for (;;) {
        const ssize_t n = ::send(fd, data, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n >= 0) return static_cast<std::int32_t>(n);
        if (errno != EINTR) return -errno;
    }
}

} // namespace eddy::detail

namespace eddy::detail {

std::int32_t try_recv(int fd, void* data, std::size_t len) noexcept {
    for (;;) {
        const ssize_t n = ::recv(fd, data, len, MSG_DONTWAIT);
        if (n >= 0) return static_cast<std::int32_t>(n);
        if (errno != EINTR) return -errno;
    }
}

} // namespace eddy::detail
