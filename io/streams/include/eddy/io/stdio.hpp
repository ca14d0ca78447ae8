//! eddy/io/stdio.hpp: the process's standard input, output and error as byte streams.
//!
//!     eddy::io::BufReader in(eddy::io::stdin());
//!     std::string line;
//!     while (co_await in.read_line(line)) co_await eddy::io::write_all(eddy::io::stdout(), line + "\n");
//!
//! Each is a StdStream over descriptor 0, 1 or 2, which it does not own (never closed).
//! Reads and writes go through io::read / io::write: a pipe or a file is read and written
//! without blocking a worker; a terminal too (the reactor waits for it). Errors are
//! std::system_error with the errno (EPIPE writing to a closed pipe: no SIGPIPE). Writes do
//! not mix with std::printf's buffered output unless that is flushed first.
//! @file
#pragma once

#include <unistd.h>

#include <cstddef>
#include <span>
#include <stop_token>
#include <utility>

#include <eddy/io/read_write.hpp>
#include <eddy/io/stream.hpp>

namespace eddy::io {

/// A byte stream (io::AsyncStream) over a descriptor it does not own: stdin(), stdout(),
/// stderr().
class StdStream {
public:
    /// Any descriptor the caller keeps open (0, 1, 2, or a test's pipe).
    explicit StdStream(int fd) noexcept : fd_(fd) {}
    /// io::read on the descriptor: up to buf.size() bytes, 0 at end of input.
    [[nodiscard]] auto read(std::span<std::byte> buf, std::stop_token token = {}) noexcept {
        return io::read(fd_, buf, std::move(token));
    }
    /// io::write on the descriptor: some of `data` (EPIPE, not SIGPIPE, on a closed pipe).
    [[nodiscard]] auto write(std::span<const std::byte> data, std::stop_token token = {}) noexcept {
        return io::write(fd_, data, std::move(token));
    }
    int native_handle() const noexcept { return fd_; }  ///< the descriptor (not owned)

private:
    int fd_;
};

static_assert(AsyncStream<StdStream>);

/// Descriptor 0, one object for the process.
inline StdStream& stdin() noexcept {
    static StdStream s(STDIN_FILENO);
    return s;
}
/// Descriptor 1, one object for the process.
inline StdStream& stdout() noexcept {
    static StdStream s(STDOUT_FILENO);
    return s;
}
/// Descriptor 2, one object for the process.
inline StdStream& stderr() noexcept {
    static StdStream s(STDERR_FILENO);
    return s;
}

}  // namespace eddy::io
