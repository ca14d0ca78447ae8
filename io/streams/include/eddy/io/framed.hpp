//! eddy/io/framed.hpp: io::FramedRead, io::FramedWrite and io::Framed run a codec
//! (eddy/io/codec.hpp) over any byte stream: items in, items out, one buffer each way.
//!
//!     eddy::io::Framed lines(socket, eddy::io::LinesCodec(4096));
//!     while (auto line = co_await lines.next())     // std::nullopt at a clean end
//!         co_await lines.feed(handle(*line));        // buffered
//!     co_await lines.flush();                        // everything fed, in one write
//!
//! # Reading, with backpressure
//! next() asks the decoder first and reads from the stream only when it gives nothing: one
//! item at a time, so a peer that floods the connection fills the socket, not the process.
//! The read buffer starts at `capacity` (8 KiB) and grows only when one item needs more (as
//! the decoder reserves, or when the buffer is full), so it stays within about the codec's
//! largest item plus one read. At the end of the stream it asks io::decode_eof() for what is
//! left; a stream that ends inside an item is io::UnexpectedEof (the bytes stay held), and
//! after the end every next() gives std::nullopt without reading.
//!
//! # Writing, batched
//! feed(item) encodes into the write buffer and writes only when the buffer has reached the
//! high-water mark (16 KiB unless told); flush() writes what is buffered; send(item) is feed
//! then flush. So N small items fed, then one flush, cost one write of the stream.
//!
//! # Cancellation and errors
//! A next() cancelled while it waits (eddy::OperationCancelled) loses nothing: the bytes read
//! so far stay in read_buffer() for the next call. A flush (or send) cancelled or failing
//! between writes keeps exactly the bytes not yet written in write_buffer(): the item is
//! encoded once, a later flush() sends the rest, and nothing goes twice. (Whether a write the
//! stream was inside of reached the peer is the stream's to say; a stream that failed is
//! usually closed.) Codec errors go through as the codec throws them (see codec.hpp for what
//! they consumed); I/O errors are the stream's.
//!
//! # Lifetime and use
//! Each refers to the stream, which must outlive it, and owns its codec and buffers. One
//! next() at a time and one feed/flush/send at a time; a Framed may read in one task while
//! it writes in another. A FramedRead and a FramedWrite over the same stream are the halves
//! to hand to two tasks. The destructor does not flush: flush() before it goes.
//! @file
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <optional>
#include <span>
#include <system_error>
#include <utility>

#include <eddy/io/codec.hpp>
#include <eddy/io/stream.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::detail {

/// The next item of `dec` over `stream` through `buf` (see the file comment); `eof` is set
/// when the stream has ended.
template <class S, class D>
Task<std::optional<typename D::Item>> framed_next(S& stream, D& dec, io::ByteBuffer& buf, bool& eof,
                                                  std::size_t chunk) {
    for (;;) {
        if (eof) co_return eddy::io::decode_eof(dec, buf);
        if (auto item = dec.decode(buf)) co_return item;
        // Into the room there is (moving what is held to the front), growing by `chunk` only
        // when less than half of it is left: what is held is less than one item.
        const std::size_t room_left = buf.capacity() - buf.size();
        const std::span<std::byte> room = buf.prepare(room_left > 0 && room_left >= chunk / 2 ? room_left : chunk);
        const std::size_t n = co_await stream.read(room);
        if (n == 0) eof = true;
        buf.commit(n);
    }
}

template <class S>
Task<void> framed_flush(S& stream, io::ByteBuffer& buf);

/// Encodes `item` into `buf`, then writes it all when it holds `high_water` bytes or more.
template <class S, class E, class Item>
Task<void> framed_feed(S& stream, E& enc, io::ByteBuffer& buf, std::size_t high_water, const Item& item) {
    enc.encode(item, buf);
    if (buf.size() >= high_water) co_await framed_flush(stream, buf);
}

/// Writes `buf` to `stream` until it is empty, consuming what each write took.
template <class S>
Task<void> framed_flush(S& stream, io::ByteBuffer& buf) {
    while (!buf.empty()) {
        const std::size_t n = co_await stream.write(buf.data());
        if (n == 0)
            throw std::system_error(EPIPE, std::generic_category(),
                                    "eddy::io::FramedWrite::flush: the stream took nothing");
        buf.consume(n);
    }
}

}  // namespace eddy::detail

namespace eddy::io {

/// The read buffer's first size, unless told: 8 KiB.
inline constexpr std::size_t kFramedReadCapacity = 8192;
/// The write buffer's high-water mark, unless told: 16 KiB.
inline constexpr std::size_t kFramedHighWater = 16384;

template <AsyncReadStream S, Decoder D>
/// Items read from a stream through a decoder (see the file comment).
class FramedRead {
public:
    using Item = typename D::Item;  ///< what next() gives

    /// Reads from `stream`, which must outlive it; `capacity`: the read buffer's first size
    /// and the least room each read gets.
    explicit FramedRead(S& stream, D decoder = D{}, std::size_t capacity = kFramedReadCapacity)
        : stream_(&stream), dec_(std::move(decoder)), buf_(std::max<std::size_t>(capacity, 1)),
          chunk_(std::max<std::size_t>(capacity, 1)) {}

    /// The next item; std::nullopt at a clean end of the stream.
    Task<std::optional<Item>> next() { return detail::framed_next(*stream_, dec_, buf_, eof_, chunk_); }

    S& get() noexcept { return *stream_; }                           ///< the stream it reads from
    D& decoder() noexcept { return dec_; }                           ///< its decoder
    ByteBuffer& read_buffer() noexcept { return buf_; }              ///< the bytes read, not yet decoded
    const ByteBuffer& read_buffer() const noexcept { return buf_; }  ///< the same, read-only
    bool at_end() const noexcept { return eof_; }                    ///< whether the stream has ended

private:
    S* stream_;
    D dec_;
    ByteBuffer buf_;
    std::size_t chunk_;
    bool eof_ = false;
};

template <AsyncWriteStream S, class E>
/// Items written to a stream through an encoder, batched (see the file comment).
class FramedWrite {
public:
    /// Writes to `stream`, which must outlive it; feed() writes once `high_water` bytes are
    /// buffered (0: every feed writes).
    explicit FramedWrite(S& stream, E encoder = E{}, std::size_t high_water = kFramedHighWater)
        : stream_(&stream), enc_(std::move(encoder)), high_water_(high_water) {}

    /// Encodes `item` into the buffer; writes it all when that reaches the high-water mark.
    template <class Item>
    requires Encoder<E, Item> Task<void> feed(const Item& item) {
        return detail::framed_feed(*stream_, enc_, buf_, high_water_, item);
    }

    /// feed(item), then flush().
    template <class Item>
    requires Encoder<E, Item> Task<void> send(const Item& item) {
        return detail::framed_feed(*stream_, enc_, buf_, 0, item);
    }

    /// Writes everything buffered.
    Task<void> flush() { return detail::framed_flush(*stream_, buf_); }

    S& get() noexcept { return *stream_; }                            ///< the stream it writes to
    E& encoder() noexcept { return enc_; }                            ///< its encoder
    const ByteBuffer& write_buffer() const noexcept { return buf_; }  ///< the bytes not written yet
    std::size_t high_water() const noexcept { return high_water_; }   ///< feed() writes from here on

private:
    S* stream_;
    E enc_;
    ByteBuffer buf_;
    std::size_t high_water_;
};

template <AsyncStream S, Codec C>
/// Both ways over one stream with one codec (see the file comment): next() as FramedRead,
/// feed/send/flush/write_buffer as FramedWrite (its base).
class Framed : public FramedWrite<S, C> {
public:
    using Item = typename C::Item;  ///< what next() gives

    /// Over `stream`, which must outlive it; `capacity` as FramedRead's, `high_water` as
    /// FramedWrite's.
    explicit Framed(S& stream, C codec = C{}, std::size_t capacity = kFramedReadCapacity,
                    std::size_t high_water = kFramedHighWater)
        : FramedWrite<S, C>(stream, std::move(codec), high_water), in_(std::max<std::size_t>(capacity, 1)),
          chunk_(std::max<std::size_t>(capacity, 1)) {}

    /// The next item; std::nullopt at a clean end of the stream.
    Task<std::optional<Item>> next() { return detail::framed_next(this->get(), codec(), in_, eof_, chunk_); }

    C& codec() noexcept { return this->encoder(); }     ///< its codec
    ByteBuffer& read_buffer() noexcept { return in_; }  ///< the bytes read, not yet decoded
    bool at_end() const noexcept { return eof_; }       ///< whether the stream has ended

private:
    ByteBuffer in_;
    std::size_t chunk_;
    bool eof_ = false;
};

}  // namespace eddy::io
