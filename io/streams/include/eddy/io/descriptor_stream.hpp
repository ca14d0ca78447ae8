//! eddy/io/descriptor_stream.hpp: io::DescriptorStream, a byte stream (eddy/io/stream.hpp)
//! over a descriptor that is not a socket: a pipe end, a FIFO, a character device, a file read
//! or written at its position. It owns the descriptor.
//!
//!     eddy::io::Pipe p = eddy::io::pipe();
//!     eddy::io::DescriptorStream in(std::move(p.read_end));
//!     eddy::io::BufReader lines(in);
//!
//! Reads and writes go through io::read / io::write (eddy/io/read_write.hpp): the same
//! errors (std::system_error with the errno), cancellation and fast paths.
//! @file
#pragma once

#include <cstddef>
#include <span>
#include <stop_token>
#include <utility>

#include <eddy/io/file_descriptor.hpp>
#include <eddy/io/read_write.hpp>
#include <eddy/io/stream.hpp>

namespace eddy::io {

/// A byte stream (io::AsyncStream) over a descriptor it owns: a pipe end, a FIFO, a
/// character device (see the file comment). Move-only; closes on destruction.
class DescriptorStream {
public:
    /// Takes ownership of `fd`.
    explicit DescriptorStream(FileDescriptor fd) noexcept : fd_(std::move(fd)) {}

    /// Up to buf.size() bytes; 0 at end of file (a pipe whose writers all closed).
    [[nodiscard]] auto read(std::span<std::byte> buf, std::stop_token token = {}) noexcept {
        return io::read(fd_.get(), buf, std::move(token));
    }
    /// Some of `data` (at least one byte unless it is empty).
    [[nodiscard]] auto write(std::span<const std::byte> data, std::stop_token token = {}) noexcept {
        return io::write(fd_.get(), data, std::move(token));
    }

    /// Closes now; std::system_error if close(2) fails.
    void close() { fd_.close(); }
    int native_handle() const noexcept { return fd_.get(); }  ///< the descriptor, still owned by this object

private:
    FileDescriptor fd_;
};

static_assert(AsyncStream<DescriptorStream>);

}  // namespace eddy::io
