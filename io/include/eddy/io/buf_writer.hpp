// eddy/io/buf_writer.hpp: io::BufWriter, a write buffer over any byte stream: many small
// writes become one write to the stream when the buffer fills or on flush().
//
//     eddy::io::BufWriter out(socket);
//     co_await out.write_all(header);
//     co_await out.write_all(body);
//     co_await out.flush();              // one write for both
//
// Nothing reaches the stream before flush() unless the buffer fills: a server answering
// pipelined requests flushes when no further request is buffered (see examples/http_hello).
// Data bigger than the buffer goes straight to the stream (after what is buffered).
// The destructor cannot suspend, so it does not flush: what is still buffered then is
// dropped. Call flush() before the writer goes (a debug build does not check this).
//
// Errors are the stream's. If a flush fails, the bytes not yet written stay buffered (a
// later flush tries them again); how many of them the peer got is unknown, as with any
// failed write. One operation at a time; reading the same stream meanwhile is fine.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <string_view>
#include <system_error>

#include <eddy/io/stream.hpp>
#include <eddy/io/stream_ops.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::io {

template <AsyncWriteStream S>
class BufWriter {
public:
    /// `capacity`: the buffer, at least 1 byte (std::invalid_argument for 0).
    explicit BufWriter(S& stream, std::size_t capacity = 8192)
        : stream_(&stream), capacity_(capacity), buf_(capacity > 0 ? std::make_unique<std::byte[]>(capacity) : nullptr) {
        if (capacity == 0) throw std::invalid_argument("eddy::io::BufWriter: capacity must be at least 1");
    }

    S& get() noexcept { return *stream_; }
    /// Bytes waiting for flush().
    std::size_t buffered() const noexcept { return len_; }
    std::size_t capacity() const noexcept { return capacity_; }

    /// Buffers `data`, writing the buffer (and `data` itself when it is bigger than the
    /// buffer) through to the stream when it does not fit.
    Task<void> write_all(std::span<const std::byte> data) {
        if (data.size() <= capacity_ - len_) {
            append(data);
            co_return;
        }
        co_await flush();
        if (data.size() >= capacity_) co_await io::write_all(*stream_, data);
        else append(data);
    }
    Task<void> write_all(std::string_view text) { return write_all(std::as_bytes(std::span(text))); }

    /// As write_all, and gives data.size(). (BufWriter is an AsyncWriteStream itself.)
    Task<std::size_t> write(std::span<const std::byte> data) {
        co_await write_all(data);
        co_return data.size();
    }

    /// Writes everything buffered to the stream.
    Task<void> flush() {
        while (len_ > 0) {
            const std::size_t n = co_await stream_->write(std::span<const std::byte>(buf_.get(), len_));
            if (n == 0) throw std::system_error(EPIPE, std::generic_category(), "eddy::io::BufWriter::flush: the stream took nothing");
            std::memmove(buf_.get(), buf_.get() + n, len_ - n);
            len_ -= n;
        }
    }

private:
    void append(std::span<const std::byte> data) noexcept {
        if (!data.empty()) std::memcpy(buf_.get() + len_, data.data(), data.size());
        len_ += data.size();
    }

    S* stream_;
    std::size_t capacity_;
    std::unique_ptr<std::byte[]> buf_;
    std::size_t len_ = 0;
};

} // namespace eddy::io
