//! eddy/io/read_write.hpp: reading and writing any file descriptor through the reactor.
//!
//!     std::size_t n = co_await eddy::io::read(fd, buf);     // 0 at end of file
//!     n = co_await eddy::io::write(fd, data);              // may be short, like write(2)
//!     n = co_await eddy::io::readv(fd, iovecs);            // one readv(2): one SQE, or none
//!     n = co_await eddy::io::writev(fd, iovecs);           // when the data is already there
//!
//! The descriptor may be blocking or not (a non-blocking one that is not ready is polled for
//! readiness, then retried). A read first tries preadv2(RWF_NOWAIT) on the worker, so data
//! that is already there (page cache, a filled pipe) costs no trip through the reactor. Reads
//! and writes use the file position, like read(2)/write(2). Errors are std::system_error
//! carrying the errno (e.g. EBADF); a stop requested on `token` cancels the operation
//! (std::errc::operation_canceled) once the kernel has let go of the buffer. `buf` (and for
//! readv/writev the iovec array and what it points to) must stay valid until the co_await
//! returns. At most IOV_MAX (1024) iovecs (EINVAL beyond).
//! @file
#pragma once

#include <cstddef>
#include <span>
#include <stop_token>

#include <sys/uio.h>

#include <eddy/io/detail/io_awaiter.hpp>

namespace eddy::io {

/// `co_await io::read(fd, buf)`: reads up to buf.size() bytes at the file position; gives the
/// count, 0 at end of file.
[[nodiscard]] inline detail::IoAwaiter read(int fd, std::span<std::byte> buf, std::stop_token token = {}) noexcept {
    return detail::IoAwaiter({.kind = detail::IoKind::kRead, .fd = fd, .addr = buf.data(), .len = buf.size()},
                             "eddy::io::read", std::move(token));
}

/// `co_await io::write(fd, data)`: writes some of `buf` at the file position; gives the count,
/// which may be short.
[[nodiscard]] inline detail::IoAwaiter write(int fd, std::span<const std::byte> buf,
                                             std::stop_token token = {}) noexcept {
    return detail::IoAwaiter(
        {.kind = detail::IoKind::kWrite, .fd = fd, .addr = const_cast<std::byte*>(buf.data()), .len = buf.size()},
        "eddy::io::write", std::move(token));
}

/// Reads into several buffers in order, like readv(2), in one operation.
[[nodiscard]] inline detail::IoAwaiter readv(int fd, std::span<const iovec> iov, std::stop_token token = {}) noexcept {
    return detail::IoAwaiter(
        {.kind = detail::IoKind::kReadv, .fd = fd, .addr = const_cast<iovec*>(iov.data()), .len = iov.size()},
        "eddy::io::readv", std::move(token));
}

/// Writes several buffers in order, like writev(2), in one operation; may be short.
[[nodiscard]] inline detail::IoAwaiter writev(int fd, std::span<const iovec> iov, std::stop_token token = {}) noexcept {
    return detail::IoAwaiter(
        {.kind = detail::IoKind::kWritev, .fd = fd, .addr = const_cast<iovec*>(iov.data()), .len = iov.size()},
        "eddy::io::writev", std::move(token));
}

}  // namespace eddy::io
