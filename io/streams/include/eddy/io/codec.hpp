//! eddy/io/codec.hpp: codecs, the two halves of a protocol's framing written once and
//! run by io::FramedRead / io::FramedWrite / io::Framed (eddy/io/framed.hpp) over any byte
//! stream: a Decoder cuts items out of the bytes received, an Encoder appends an item's bytes
//! to what is to be sent. Neither does I/O, so a codec is tested without a socket.
//!
//!     struct Decoder {                                 // io::Decoder
//!         using Item = ...;
//!         std::optional<Item> decode(io::ByteBuffer& in);      // nullopt: more bytes needed
//!         std::optional<Item> decode_eof(io::ByteBuffer& in);  // optional (see below)
//!     };
//!     struct Encoder {                                 // io::Encoder<Item>
//!         void encode(const Item& item, io::ByteBuffer& out);
//!     };
//!
//! decode() sees every byte received and not yet consumed (`in.data()`), consumes what the
//! item it gives used (`in.consume(n)`), and gives std::nullopt, consuming what it likes
//! (usually nothing), while the item is not whole: the framed reader then reads more and
//! asks again. It may `in.reserve(n)` when it knows the item needs n bytes, but what a peer
//! announces is not what it has sent: reserve by what has arrived (LengthDelimitedCodec
//! reserves at most twice the bytes held, or 64 KiB ahead of them), so that a peer that
//! announces a large item and sends a few bytes costs a few bytes. At the end of
//! the stream, decode_eof() is asked until it gives std::nullopt; without one of its own
//! (io::decode_eof), a codec gets decode(), then io::UnexpectedEof if bytes are left.
//!
//! Two codecs come with it:
//!   LinesCodec            "\n"-ended lines (a "\r" before it dropped) as std::string, at
//!                         most max_length bytes each, "\n" included.
//!   LengthDelimitedCodec  a big-endian length (4 bytes unless told), then that many bytes
//!                         of payload, as std::vector<std::byte>; at most max_frame.
//!
//! Errors, and what was consumed when they are thrown:
//!   - a line longer than max_length: io::LineTooLong, after consuming the bytes of that
//!     line received so far, its "\n" included when it is there (the message gives the
//!     count). Later decodes discard the rest of the line, up to and including its "\n",
//!     without holding it (discarding() says so meanwhile): the next item is the following
//!     line. Over a stream that hands out one byte at a time, exactly max_length bytes are
//!     dropped with the error.
//!   - a length above max_frame: io::FrameTooLong, after consuming the header only (the
//!     stream then stands before the payload; a connection is usually closed).
//!   - the stream ending inside an item: io::UnexpectedEof, consuming nothing; the message
//!     gives the count of bytes held. (A last line without "\n" is still a line.)
//! @file
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <eddy/io/frames.hpp>  // kDefaultMaxFrame
#include <eddy/io/stream_errors.hpp>

namespace eddy::io {

/// A growable byte buffer with a read cursor: bytes are appended at the end and consumed at
/// the front; room is made by moving the unconsumed bytes to the front before growing.
class ByteBuffer {
public:
    /// Empty, with room for `capacity` bytes before it grows.
    explicit ByteBuffer(std::size_t capacity = 0)
        : buf_(capacity > 0 ? std::make_unique_for_overwrite<std::byte[]>(capacity) : nullptr), size_(capacity) {}

    /// The bytes appended and not consumed yet.
    std::span<const std::byte> data() const noexcept { return {buf_.get() + begin_, end_ - begin_}; }
    /// The same, as characters.
    std::string_view view() const noexcept {
        return {reinterpret_cast<const char*>(buf_.get() + begin_), end_ - begin_};
    }
    std::size_t size() const noexcept { return end_ - begin_; }  ///< bytes not consumed yet
    bool empty() const noexcept { return begin_ == end_; }       ///< nothing left to consume
    std::size_t capacity() const noexcept { return size_; }      ///< the memory held, in bytes

    /// Marks the first `n` bytes as used (at most size()).
    void consume(std::size_t n) noexcept {
        begin_ += std::min(n, end_ - begin_);
        if (begin_ == end_) begin_ = end_ = 0;
    }
    /// Drops everything (the memory stays).
    void clear() noexcept { begin_ = end_ = 0; }

    /// Makes room for `n` bytes in all (those held included) without moving them again.
    void reserve(std::size_t n) {
        if (n <= size_ - begin_) return;
        if (n <= size_) return compact();
        regrow(std::max(n, size_ * 2));
    }

    /// Free room of at least `n` bytes after the held ones, to read into; commit() what was
    /// written there.
    std::span<std::byte> prepare(std::size_t n) {
        if (size_ - end_ < n) reserve(size() + n);
        return {buf_.get() + end_, size_ - end_};
    }
    /// Adds `n` bytes written into the span prepare() gave.
    void commit(std::size_t n) noexcept { end_ += std::min(n, size_ - end_); }

    /// Appends `bytes`.
    void append(std::span<const std::byte> bytes) {
        if (bytes.empty()) return;
        std::memcpy(prepare(bytes.size()).data(), bytes.data(), bytes.size());
        end_ += bytes.size();
    }
    /// Appends the characters of `text`.
    void append(std::string_view text) { append(std::as_bytes(std::span(text))); }

private:
    void compact() noexcept {
        if (begin_ == 0) return;
        std::memmove(buf_.get(), buf_.get() + begin_, end_ - begin_);
        end_ -= begin_;
        begin_ = 0;
    }
    void regrow(std::size_t size) {
        // Not zero-filled: the room is written before it is read, and a large buffer's pages
        // stay untouched (not resident) until bytes arrive in them.
        auto bigger = std::make_unique_for_overwrite<std::byte[]>(size);
        if (end_ > begin_) std::memcpy(bigger.get(), buf_.get() + begin_, end_ - begin_);
        end_ -= begin_;
        begin_ = 0;
        buf_ = std::move(bigger);
        size_ = size;
    }

    std::unique_ptr<std::byte[]> buf_;
    std::size_t size_;  // of buf_
    std::size_t begin_ = 0, end_ = 0;
};

/// Cuts items out of received bytes (see the file comment): `D::Item`, and
/// `decode(ByteBuffer&)` giving std::optional<Item>.
template <class D>
concept Decoder = requires(D& d, ByteBuffer& in) {
    typename D::Item;
    { d.decode(in) } -> std::same_as<std::optional<typename D::Item>>;
};

/// Appends an Item's bytes to a write buffer: `encode(const Item&, ByteBuffer&)`.
template <class E, class Item>
concept Encoder = requires(E& e, const Item& item, ByteBuffer& out) {
    e.encode(item, out);
};

/// Both: a codec that reads and writes its own Item.
template <class C>
concept Codec = Decoder<C> && Encoder<C, typename C::Item>;

template <Decoder D>
/// The decoder's decode_eof when it has one; otherwise decode(), and io::UnexpectedEof
/// (consuming nothing) when it gives nothing while bytes are held.
std::optional<typename D::Item> decode_eof(D& decoder, ByteBuffer& in) {
    if constexpr (requires { decoder.decode_eof(in); }) {
        return decoder.decode_eof(in);
    } else {
        auto item = decoder.decode(in);
        if (!item && !in.empty())
            throw UnexpectedEof("eddy::io::decode_eof: the stream ended inside a frame, " + std::to_string(in.size()) +
                                " bytes held");
        return item;
    }
}

/// "\n"-ended lines as std::string, without their "\n" or "\r\n" (see the file comment).
class LinesCodec {
public:
    using Item = std::string;  ///< a line, without its "\n" or "\r\n"

    /// `max_length`: the longest line, its "\n" included (at least 1; std::invalid_argument
    /// for 0). The default is BufReader's 64 KiB.
    explicit LinesCodec(std::size_t max_length = 64 * 1024) : max_length_(max_length) {
        if (max_length == 0) throw std::invalid_argument("eddy::io::LinesCodec: max_length must be at least 1");
    }

    std::size_t max_length() const noexcept { return max_length_; }  ///< the longest line, "\n" included
    /// Whether it is discarding the rest of a line that was too long.
    bool discarding() const noexcept { return discarding_; }

    /// The next line, or nullopt until its "\n" is there. io::LineTooLong past max_length.
    std::optional<std::string> decode(ByteBuffer& in) {
        const std::string_view text = in.view();
        if (discarding_) {
            const std::size_t nl = text.find('\n');
            if (nl == std::string_view::npos) {
                in.consume(text.size());
                return std::nullopt;
            }
            in.consume(nl + 1);
            discarding_ = false;
            return decode(in);
        }
        const std::size_t limit = std::min(text.size(), max_length_);
        const std::size_t nl = text.substr(0, limit).find('\n', std::min(scanned_, limit));
        if (nl == std::string_view::npos) {
            scanned_ = limit;
            if (text.size() < max_length_) return std::nullopt;
            // max_length bytes without their "\n": drop the line, or what is here of it and
            // the rest as it comes.
            scanned_ = 0;
            const std::size_t end = text.find('\n', limit);
            discarding_ = end == std::string_view::npos;
            const std::size_t dropped = discarding_ ? text.size() : end + 1;
            in.consume(dropped);
            throw LineTooLong(
                "eddy::io::LinesCodec: a line longer than " + std::to_string(max_length_) + " bytes: dropped " +
                std::to_string(dropped) +
                (discarding_ ? " bytes of it, the rest up to its \"\\n\" is skipped" : " bytes, all of it"));
        }
        scanned_ = 0;
        std::size_t len = nl;
        if (len > 0 && text[len - 1] == '\r') --len;
        std::string line(text.substr(0, len));
        in.consume(nl + 1);
        return line;
    }

    /// At the end of the stream: the lines left, then the last one without "\n" (when it
    /// is not being discarded), then nullopt.
    std::optional<std::string> decode_eof(ByteBuffer& in) {
        if (auto line = decode(in)) return line;
        scanned_ = 0;
        if (discarding_ || in.empty()) {
            discarding_ = false;
            in.clear();
            return std::nullopt;
        }
        std::string_view text = in.view();
        if (text.back() == '\r') text.remove_suffix(1);
        std::string line(text);
        in.clear();
        return line;
    }

    /// Appends `line` and "\n".
    void encode(std::string_view line, ByteBuffer& out) {
        out.reserve(out.size() + line.size() + 1);
        out.append(line);
        out.append(std::string_view("\n"));
    }
    /// Appends `line` and "\n".
    void encode(const std::string& line, ByteBuffer& out) { encode(std::string_view(line), out); }

private:
    std::size_t max_length_;
    std::size_t scanned_ = 0;  // bytes at the front known to hold no "\n"
    bool discarding_ = false;  // skipping the rest of a line that was too long
};

/// A big-endian length, then that many bytes of payload (see the file comment); the wire
/// format of io::FrameReader / io::FrameWriter with the default header of 4 bytes.
class LengthDelimitedCodec {
public:
    using Item = std::vector<std::byte>;  ///< a frame's payload

    /// `max_frame`: the largest payload; `header`: the length's size, 1, 2, 4 or 8 bytes
    /// (std::invalid_argument otherwise).
    explicit LengthDelimitedCodec(std::size_t max_frame = kDefaultMaxFrame, std::size_t header = 4)
        : max_frame_(max_frame), header_(header) {
        if (header != 1 && header != 2 && header != 4 && header != 8)
            throw std::invalid_argument("eddy::io::LengthDelimitedCodec: header must be 1, 2, 4 or 8 bytes");
    }

    std::size_t max_frame() const noexcept { return max_frame_; }  ///< the largest payload
    std::size_t header() const noexcept { return header_; }        ///< the length's size in bytes

    /// Room reserved ahead of the bytes held while a frame is incomplete (see decode()).
    static constexpr std::size_t kReserveAhead = 64 * 1024;

    /// The next payload, or nullopt until it is whole (reserving room for it as its bytes
    /// arrive: at most twice those held, or kReserveAhead past them, never past the frame's
    /// end). io::FrameTooLong past max_frame, after consuming the header.
    std::optional<Item> decode(ByteBuffer& in) {
        const std::span<const std::byte> bytes = in.data();
        if (bytes.size() < header_) return std::nullopt;
        std::uint64_t len = 0;
        for (std::size_t i = 0; i < header_; ++i) len = len << 8 | std::to_integer<std::uint64_t>(bytes[i]);
        if (len > max_frame_) {
            in.consume(header_);
            throw FrameTooLong("eddy::io::LengthDelimitedCodec: a frame of " + std::to_string(len) +
                               " bytes (max_frame " + std::to_string(max_frame_) + "); its header was consumed");
        }
        const std::size_t whole = header_ + static_cast<std::size_t>(len);
        if (bytes.size() < whole) {
            // Not the announced size at once: a peer that announces max_frame and sends ten
            // bytes would hold max_frame of this process' memory per connection.
            in.reserve(std::min(whole, std::max(2 * bytes.size(), bytes.size() + kReserveAhead)));
            return std::nullopt;
        }
        Item payload(bytes.begin() + static_cast<std::ptrdiff_t>(header_),
                     bytes.begin() + static_cast<std::ptrdiff_t>(whole));
        in.consume(whole);
        return payload;
    }

    /// Appends the length and `payload`; io::FrameTooLong, appending nothing, past max_frame
    /// or what the header can say.
    void encode(std::span<const std::byte> payload, ByteBuffer& out) {
        const std::uint64_t most = header_ == 8 ? UINT64_MAX : (std::uint64_t{1} << (8 * header_)) - 1;
        if (payload.size() > max_frame_ || payload.size() > most)
            throw FrameTooLong("eddy::io::LengthDelimitedCodec: a payload of " + std::to_string(payload.size()) +
                               " bytes (max_frame " + std::to_string(max_frame_) + ")");
        std::byte head[8];
        for (std::size_t i = 0; i < header_; ++i) head[i] = std::byte(payload.size() >> (8 * (header_ - 1 - i)));
        out.reserve(out.size() + header_ + payload.size());
        out.append(std::span<const std::byte>(head, header_));
        out.append(payload);
    }
    /// encode() of a vector's bytes.
    void encode(const Item& payload, ByteBuffer& out) { encode(std::span<const std::byte>(payload), out); }

private:
    std::size_t max_frame_;
    std::size_t header_;
};

}  // namespace eddy::io
