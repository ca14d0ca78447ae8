//! eddy/io/buf_writer.hpp: io::BufWriter, a write buffer over any byte stream: many small
//! writes become one write to the stream when the buffer fills or on flush().
//!
//!     eddy::io::BufWriter out(socket);
//!     co_await out.write_all(header);
//!     co_await out.write_all(body);
//!     co_await out.flush();              // one write for both
//!
//! Nothing reaches the stream before flush() unless the buffer fills: a server answering
//! pipelined requests flushes when no further request is buffered (see examples/http_hello).
//! Data bigger than the buffer goes straight to the stream (after what is buffered).
//! The destructor cannot suspend, so it does not flush: what is still buffered then is
//! dropped. Call flush() before the writer goes (a debug build does not check this).
//!
//! Errors are the stream's. If a flush fails, the bytes stay buffered, but how many of them
//! the peer got is unknown, as with any failed write: a stream that failed is usually closed.
//! One operation at a time; reading the same stream meanwhile is fine.
//! @file
#pragma once

#include <cerrno>
#include <cstddef>
#include <coroutine>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <utility>

#include <eddy/io/detail/nested_await.hpp>
#include <eddy/io/stream.hpp>
#include <eddy/io/stream_ops.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::io {

template <AsyncWriteStream S>
/// A write buffer over a byte stream: many small writes become one (see the file comment).
/// Refers to the stream, which must outlive it; owns only its buffer.
class BufWriter {
public:
    /// `capacity`: the buffer, at least 1 byte (std::invalid_argument for 0).
    explicit BufWriter(S& stream, std::size_t capacity = 8192)
        : stream_(&stream), capacity_(capacity),
          buf_(capacity > 0 ? std::make_unique<std::byte[]>(capacity) : nullptr) {
        if (capacity == 0) throw std::invalid_argument("eddy::io::BufWriter: capacity must be at least 1");
    }

    S& get() noexcept { return *stream_; }  ///< the stream it writes to
    /// Bytes waiting for flush().
    std::size_t buffered() const noexcept { return len_; }
    std::size_t capacity() const noexcept { return capacity_; }  ///< the buffer's size

    /// Buffers `data`, writing the buffer (and `data` itself when it is bigger than the
    /// buffer) through to the stream when it does not fit. (An awaiter: no coroutine frame
    /// when `data` fits.)
    [[nodiscard]] auto write_all(std::span<const std::byte> data) noexcept { return WriteAll(*this, data); }
    /// write_all of the text's bytes.
    [[nodiscard]] auto write_all(std::string_view text) noexcept {
        return WriteAll(*this, std::as_bytes(std::span(text)));
    }

    /// As write_all, and gives data.size(). (BufWriter is an AsyncWriteStream itself.)
    Task<std::size_t> write(std::span<const std::byte> data) {
        co_await write_all(data);
        co_return data.size();
    }

    /// Writes everything buffered to the stream. (An awaiter: over a stream with a write_all
    /// of its own, such as TcpStream, one operation of the stream and no coroutine frame.)
    [[nodiscard]] auto flush() noexcept { return Flush(*this); }

private:
    static constexpr bool kStreamWritesAll = requires(S & s, std::span<const std::byte> d) { s.write_all(d); };

    class WriteAll {
    public:
        /// Points into the caller's stream and buffer: awaited in place, never spawned
        /// (eddy/tasks/awaitable.hpp).
        using borrows_operands = void;
        WriteAll(BufWriter& w, std::span<const std::byte> data) noexcept : w_(w), data_(data) {}
        bool await_ready() noexcept {
            if (data_.size() > w_.capacity_ - w_.len_) return false;
            w_.append(data_);
            return true;
        }
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) {
            slow_made_ = true;
            slow_.make([this] { return w_.write_all_slow(data_); });
            return slow_.suspend(h);
        }
        void await_resume() {
            if (slow_made_) slow_.resume();
        }
        /// As a Task, for what takes one (spawn, when_all, with_timeout).
        Task<void> into_task() && { return as_task(w_, data_); }

    private:
        static Task<void> as_task(BufWriter& w, std::span<const std::byte> data) { co_await w.write_all(data); }
        BufWriter& w_;
        std::span<const std::byte> data_;
        eddy::detail::NestedAwait<Task<void>> slow_;
        bool slow_made_ = false;
    };

    class Flush {
    public:
        /// Points into the caller's stream and buffer: awaited in place, never spawned
        /// (eddy/tasks/awaitable.hpp).
        using borrows_operands = void;
        explicit Flush(BufWriter& w) noexcept : w_(w) {}
        bool await_ready() const noexcept { return w_.len_ == 0; }
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) {
            made_ = true;
            op_.make([this] { return w_.flush_op(); });
            return op_.suspend(h);
        }
        void await_resume() {
            if (!made_) return;
            op_.resume();
            if constexpr (kStreamWritesAll) w_.len_ = 0;  // flush_slow() keeps len_ itself
        }
        /// As a Task, for what takes one (spawn, when_all, with_timeout).
        Task<void> into_task() && { return as_task(w_); }

    private:
        static Task<void> as_task(BufWriter& w) { co_await w.flush(); }
        using Op = decltype(std::declval<BufWriter&>().flush_op());
        BufWriter& w_;
        eddy::detail::NestedAwait<Op> op_;
        bool made_ = false;
    };

    /// The stream's write_all of the whole buffer when it has one (if it fails, the bytes stay
    /// buffered: some may have reached the peer), else flush_slow().
    auto flush_op() {
        if constexpr (kStreamWritesAll) return stream_->write_all(std::span<const std::byte>(buf_.get(), len_));
        else return flush_slow();
    }

    Task<void> write_all_slow(std::span<const std::byte> data) {
        co_await flush();
        if (data.size() >= capacity_) co_await io::write_all(*stream_, data);
        else append(data);
    }

    Task<void> flush_slow() {
        while (len_ > 0) {
            const std::size_t n = co_await stream_->write(std::span<const std::byte>(buf_.get(), len_));
            if (n == 0)
                throw std::system_error(EPIPE, std::generic_category(),
                                        "eddy::io::BufWriter::flush: the stream took nothing");
            std::memmove(buf_.get(), buf_.get() + n, len_ - n);
            len_ -= n;
        }
    }

    void append(std::span<const std::byte> data) noexcept {
        if (!data.empty()) std::memcpy(buf_.get() + len_, data.data(), data.size());
        len_ += data.size();
    }

    S* stream_;
    std::size_t capacity_;
    std::unique_ptr<std::byte[]> buf_;
    std::size_t len_ = 0;
};

}  // namespace eddy::io
