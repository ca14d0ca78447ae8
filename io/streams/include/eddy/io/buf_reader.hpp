//! eddy/io/buf_reader.hpp: io::BufReader, a read buffer over any byte stream (TCP, Unix,
//! pipes through io::DescriptorStream, files, TLS), with the line and delimiter searches a
//! protocol parser needs.
//!
//!     eddy::io::BufReader in(socket);                   // 8 KiB buffer, lines up to 64 KiB
//!     std::string line;
//!     while (co_await in.read_line(line)) handle(line);  // "\n" or "\r\n" stripped
//!
//!     auto lines = in.lines();                          // the same, as a loop
//!     while (auto line = co_await lines.next()) handle(*line);
//!
//! # Bounded
//! A line (read_until, read_line, lines) is kept in the buffer until its delimiter arrives, so
//! the buffer grows past its capacity for a long line, but never past max_line: a line longer
//! than that (delimiter included) throws io::LineTooLong, and its first max_line bytes are
//! dropped (the reader then stands inside that line; a server usually answers and closes).
//!
//! # Cancellation
//! An operation cancelled while it waits for the stream (eddy::OperationCancelled) has
//! consumed nothing: what was read meanwhile stays buffered for the next call. (The bytes of
//! a line are handed out only once the whole line is there.) One that the buffer serves
//! without waiting completes even in a cancelled task, as it loses nothing; the next wait
//! throws.
//!
//! # Lifetime and use
//! The reader refers to the stream, which must outlive it; it owns only its buffer. One
//! operation at a time. Writing to the same stream meanwhile is fine (a BufWriter over it).
//! Reads bigger than the buffer go straight to the stream once the buffer is empty.
//! @file
#pragma once

#include <algorithm>
#include <coroutine>
#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <eddy/io/detail/nested_await.hpp>
#include <eddy/io/stream.hpp>
#include <eddy/io/stream_errors.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::io {

template <AsyncReadStream S>
class BufReader;

/// BufReader::lines(): `while (auto line = co_await lines.next())`, each line without its
/// "\n" or "\r\n"; std::nullopt at end of stream.
template <AsyncReadStream S>
class Lines {
public:
    /// Reads through `reader`, which must outlive it.
    explicit Lines(BufReader<S>& reader) noexcept : reader_(&reader) {}
    /// The next line, or std::nullopt at end of stream; io::LineTooLong as read_line.
    Task<std::optional<std::string>> next() {
        std::string line;
        if (!co_await reader_->read_line(line)) co_return std::nullopt;
        co_return line;
    }

private:
    BufReader<S>* reader_;
};

template <AsyncReadStream S>
/// A read buffer over a byte stream, with line and delimiter searches (see the file
/// comment). Refers to the stream, which must outlive it; owns only its buffer.
class BufReader {
public:
    /// `capacity`: the buffer (at least 1 byte); `max_line`: the longest line, delimiter
    /// included (at least 1). std::invalid_argument for 0.
    explicit BufReader(S& stream, std::size_t capacity = 8192, std::size_t max_line = 64 * 1024)
        : stream_(&stream), capacity_(checked(capacity)), max_line_(checked(max_line)),
          buf_(std::make_unique<std::byte[]>(capacity_)), size_(capacity_) {}

    S& get() noexcept { return *stream_; }  ///< the stream it reads from
    std::size_t capacity() const noexcept {
        return capacity_;
    }  ///< the buffer's size, which a long line may exceed up to max_line()
    std::size_t max_line() const noexcept { return max_line_; }  ///< the longest line it accepts, delimiter included

    /// What is buffered now (no I/O).
    std::span<const std::byte> buffer() const noexcept { return {buf_.get() + begin_, end_ - begin_}; }

    /// The buffered bytes, reading once from the stream if there are none; an empty span at
    /// end of stream. consume() what was used. (An awaiter: no coroutine frame per call.)
    [[nodiscard]] auto fill_buf() noexcept { return FillBuf(*this); }

    /// Marks `n` buffered bytes as used (n <= buffer().size()).
    void consume(std::size_t n) noexcept { begin_ += std::min(n, end_ - begin_); }

    /// Up to buf.size() bytes: the buffered ones, or one read from the stream; 0 at end of
    /// stream. (BufReader is an AsyncReadStream itself.)
    Task<std::size_t> read(std::span<std::byte> buf) {
        if (begin_ == end_ && buf.size() >= capacity_) co_return co_await stream_->read(buf);  // no copy
        if (begin_ == end_) co_await refill();
        co_return take(buf);
    }

    /// Fills `buf` completely; io::UnexpectedEof if the stream ends first (what came is
    /// consumed). (An awaiter that needs no coroutine frame when `buf` is buffered already.)
    [[nodiscard]] auto read_exact(std::span<std::byte> buf) noexcept { return ReadExact(*this, buf); }

private:
    class ReadExact {
    public:
        /// Points into the caller's stream and buffer: awaited in place, never spawned
        /// (eddy/tasks/awaitable.hpp).
        using borrows_operands = void;
        ReadExact(BufReader& r, std::span<std::byte> buf) noexcept : r_(r), buf_(buf) {}
        bool await_ready() noexcept {
            if (r_.end_ - r_.begin_ < buf_.size()) return false;
            r_.take(buf_);
            return true;
        }
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) {
            slow_made_ = true;
            slow_.make([this] { return r_.read_exact_slow(buf_); });
            return slow_.suspend(h);
        }
        void await_resume() {
            if (slow_made_) slow_.resume();
        }
        /// As a Task, for what takes one (spawn, when_all, with_timeout).
        Task<void> into_task() && { return as_task(r_, buf_); }

    private:
        static Task<void> as_task(BufReader& r, std::span<std::byte> buf) { co_await r.read_exact(buf); }
        BufReader& r_;
        std::span<std::byte> buf_;
        eddy::detail::NestedAwait<Task<void>> slow_;
        bool slow_made_ = false;
    };

    Task<void> read_exact_slow(std::span<std::byte> buf) {
        std::size_t got = take(buf);
        while (got < buf.size()) {
            const std::size_t n = co_await read(buf.subspan(got));
            if (n == 0)
                throw UnexpectedEof("eddy::io::BufReader::read_exact: the stream ended after " + std::to_string(got) +
                                    " of " + std::to_string(buf.size()) + " bytes");
            got += n;
        }
    }

public:
    /// Appends to `out` the bytes up to and including the next `delim` and gives their count;
    /// at end of stream, what is left (without a delimiter), 0 when nothing is. io::LineTooLong
    /// past max_line (see the top of the file).
    Task<std::size_t> read_until(char delim, std::string& out) {
        const std::size_t n = co_await find(delim);
        out.append(reinterpret_cast<const char*>(buf_.get() + begin_), n);
        begin_ += n;
        co_return n;
    }

    /// Replaces `line` with the next line, without its "\n" or "\r\n"; false at end of stream.
    /// A last line without '\n' is still a line. io::LineTooLong past max_line. (An awaiter
    /// that needs no coroutine frame when the whole line is buffered already.)
    [[nodiscard]] auto read_line(std::string& line) noexcept { return ReadLine(*this, line); }

    /// The lines as a loop: `while (auto line = co_await lines.next())`.
    Lines<S> lines() noexcept { return Lines<S>(*this); }

private:
    using ReadOp = decltype(std::declval<S&>().read(std::declval<std::span<std::byte>>()));

    class FillBuf {
    public:
        /// Points into the caller's stream and buffer: awaited in place, never spawned
        /// (eddy/tasks/awaitable.hpp).
        using borrows_operands = void;
        explicit FillBuf(BufReader& r) noexcept : r_(r) {}
        bool await_ready() const noexcept { return r_.begin_ != r_.end_; }
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) {
            r_.begin_ = r_.end_ = 0;
            read_.make([this] { return r_.stream_->read(std::span(r_.buf_.get(), r_.size_)); });
            waited_ = true;
            return read_.suspend(h);
        }
        std::span<const std::byte> await_resume() {
            if (waited_) r_.end_ += static_cast<std::size_t>(read_.resume());
            return r_.buffer();
        }
        /// As a Task, for what takes one (spawn, when_all, with_timeout).
        Task<std::span<const std::byte>> into_task() && { return as_task(r_); }

    private:
        static Task<std::span<const std::byte>> as_task(BufReader& r) { co_return co_await r.fill_buf(); }

        BufReader& r_;
        eddy::detail::NestedAwait<ReadOp> read_;
        bool waited_ = false;
    };

    class ReadLine {
    public:
        /// Points into the caller's stream and buffer: awaited in place, never spawned
        /// (eddy/tasks/awaitable.hpp).
        using borrows_operands = void;
        ReadLine(BufReader& r, std::string& line) noexcept : r_(r), line_(line) {}
        /// A whole line buffered: taken here, without suspending.
        bool await_ready() {
            const std::byte* at = r_.buf_.get() + r_.begin_;
            const void* hit = std::memchr(at, '\n', r_.end_ - r_.begin_);
            if (hit == nullptr) return false;
            const std::size_t n = static_cast<std::size_t>(static_cast<const std::byte*>(hit) - at) + 1;
            if (n > r_.max_line_) return false;  // the slow path throws
            r_.take_line(line_, n);
            ready_ = true;
            return true;
        }
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) {
            slow_.make([this] { return r_.read_line_slow(line_); });
            return slow_.suspend(h);
        }
        bool await_resume() { return ready_ || slow_.resume(); }
        /// As a Task, for what takes one (spawn, when_all, with_timeout).
        Task<bool> into_task() && { return as_task(r_, line_); }

    private:
        static Task<bool> as_task(BufReader& r, std::string& line) { co_return co_await r.read_line(line); }

        BufReader& r_;
        std::string& line_;
        eddy::detail::NestedAwait<Task<bool>> slow_;
        bool ready_ = false;
    };

    Task<bool> read_line_slow(std::string& line) {
        const std::size_t n = co_await find('\n');
        take_line(line, n);
        co_return n > 0;
    }

    /// The n bytes at begin_ into `line`, without "\n" or "\r\n".
    void take_line(std::string& line, std::size_t n) {
        const char* p = reinterpret_cast<const char*>(buf_.get() + begin_);
        std::size_t len = n;
        if (len > 0 && p[len - 1] == '\n') --len;
        if (len > 0 && p[len - 1] == '\r') --len;
        line.assign(p, len);
        begin_ += n;
    }

    static std::size_t checked(std::size_t n) {
        if (n == 0) throw std::invalid_argument("eddy::io::BufReader: capacity and max_line must be at least 1");
        return n;
    }

    /// Copies buffered bytes into `buf`; gives how many.
    std::size_t take(std::span<std::byte> buf) noexcept {
        const std::size_t n = std::min(buf.size(), end_ - begin_);
        if (n > 0) std::memcpy(buf.data(), buf_.get() + begin_, n);
        begin_ += n;
        return n;
    }

    /// One read from the stream into the free space at the end of the buffer (moving the
    /// buffered bytes to the front first, or growing the buffer up to max_line when it is
    /// full); false at end of stream. Nothing buffered is lost if the read is cancelled.
    Task<bool> refill() {
        if (begin_ == end_) {
            begin_ = end_ = 0;
        } else if (end_ == size_) {
            if (begin_ > 0) {
                std::memmove(buf_.get(), buf_.get() + begin_, end_ - begin_);
                end_ -= begin_;
                begin_ = 0;
            } else {
                grow();
            }
        }
        const std::size_t n = co_await stream_->read(std::span(buf_.get() + end_, size_ - end_));
        end_ += n;
        co_return n > 0;
    }

    void grow() {
        const std::size_t size = std::min(std::max(size_ * 2, capacity_), max_line_ + 1);
        auto bigger = std::make_unique<std::byte[]>(size);
        std::memcpy(bigger.get(), buf_.get() + begin_, end_ - begin_);
        end_ -= begin_;
        begin_ = 0;
        buf_ = std::move(bigger);
        size_ = size;
    }

    /// Reads until `delim` is buffered (or the stream ends); gives the length of the line at
    /// begin_, delimiter included (the rest of the stream without it at the end).
    Task<std::size_t> find(char delim) {
        std::size_t scanned = 0;  // bytes after begin_ known to hold no delimiter
        for (;;) {
            const std::byte* at = buf_.get() + begin_;
            const std::size_t buffered = end_ - begin_;
            if (const void* hit = std::memchr(at + scanned, delim, buffered - scanned)) {
                const std::size_t n = static_cast<std::size_t>(static_cast<const std::byte*>(hit) - at) + 1;
                if (n > max_line_) too_long();
                co_return n;
            }
            scanned = buffered;
            if (buffered >= max_line_) too_long();
            if (!co_await refill()) co_return end_ - begin_;  // the last line, without delimiter
        }
    }

    [[noreturn]] void too_long() {
        begin_ += std::min(max_line_, end_ - begin_);
        throw LineTooLong("eddy::io::BufReader: a line longer than " + std::to_string(max_line_) + " bytes");
    }

    S* stream_;
    std::size_t capacity_;
    std::size_t max_line_;
    std::unique_ptr<std::byte[]> buf_;
    std::size_t size_;  // of buf_: capacity_, or more while a long line is read
    std::size_t begin_ = 0, end_ = 0;
};

}  // namespace eddy::io
