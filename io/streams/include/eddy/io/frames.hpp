//! eddy/io/frames.hpp: length-prefixed frames over any byte stream: a 4-byte big-endian
//! length, then that many bytes of payload.
//!
//!     eddy::io::FrameWriter out(socket);
//!     co_await out.write_frame(payload);
//!     eddy::io::FrameReader in(socket);
//!     std::vector<std::byte> frame;
//!     while (co_await in.read_frame(frame)) handle(frame);
//!
//! A frame above max_frame (16 MiB unless told) is io::FrameTooLong on both sides: the
//! reader has then consumed the header only (the stream stands before the payload, so the
//! connection is usually closed), the writer has written nothing. A stream that ends between
//! frames is the clean end (read_frame gives false); one that ends inside a header or a
//! payload is io::UnexpectedEof (ENODATA). Other errors are the stream's.
//! Both refer to the stream (it must outlive them). Each frame is read and written with the
//! stream's own reads and writes: over a socket, put a BufReader under the FrameReader for
//! many small frames, and a BufWriter under the FrameWriter to send header and payload in
//! one write (and flush it). For a stream of frames with one buffer each way, batching
//! and backpressure, io::Framed with io::LengthDelimitedCodec (eddy/io/framed.hpp) speaks
//! the same format; these two are the simpler tool.
//! @file
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <eddy/io/stream.hpp>
#include <eddy/io/stream_errors.hpp>
#include <eddy/io/stream_ops.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::io {

/// The largest payload FrameReader and FrameWriter accept unless told: 16 MiB.
inline constexpr std::size_t kDefaultMaxFrame = std::size_t{16} << 20;

template <AsyncReadStream S>
/// Reads length-prefixed frames from a stream (see the file comment).
class FrameReader {
public:
    /// Reads from `stream`, which must outlive it; a frame above `max_frame` is io::FrameTooLong.
    explicit FrameReader(S& stream, std::size_t max_frame = kDefaultMaxFrame) noexcept
        : stream_(&stream), max_frame_(max_frame) {}

    /// Replaces `out` with the next frame's payload; false at a clean end of stream.
    Task<bool> read_frame(std::vector<std::byte>& out) {
        std::array<std::byte, 4> header;
        std::size_t got = 0;
        while (got < header.size()) {
            const std::size_t n = co_await stream_->read(std::span(header).subspan(got));
            if (n == 0 && got == 0) co_return false;
            if (n == 0)
                throw UnexpectedEof("eddy::io::FrameReader: the stream ended inside a frame header (" +
                                    std::to_string(got) + " of 4 bytes)");
            got += n;
        }
        std::uint32_t len = 0;
        for (std::byte b : header) len = len << 8 | std::to_integer<std::uint32_t>(b);
        if (len > max_frame_)
            throw FrameTooLong("eddy::io::FrameReader: a frame of " + std::to_string(len) + " bytes (max_frame " +
                               std::to_string(max_frame_) + ")");
        // The payload grows as it arrives (doubling, from at most kGrowStep), not to the
        // announced length at once: a peer that announces max_frame and sends ten bytes
        // must not hold max_frame of memory per connection.
        out.clear();
        try {
            while (out.size() < len) {
                const std::size_t have = out.size();
                out.resize(have + std::min<std::size_t>(len - have, std::max(have, kGrowStep)));
                co_await io::read_exact(*stream_, std::span(out).subspan(have));
            }
        } catch (const UnexpectedEof&) {
            throw UnexpectedEof("eddy::io::FrameReader: the stream ended inside a frame of " + std::to_string(len) +
                                " bytes");
        }
        co_return true;
    }

private:
    // The payload's first step: a vector's growth zero-fills (touches) what it adds.
    static constexpr std::size_t kGrowStep = 4096;

    S* stream_;
    std::size_t max_frame_;
};

template <AsyncWriteStream S>
/// Writes length-prefixed frames to a stream (see the file comment).
class FrameWriter {
public:
    /// Writes to `stream`, which must outlive it; a payload above `max_frame` is io::FrameTooLong.
    explicit FrameWriter(S& stream, std::size_t max_frame = kDefaultMaxFrame) noexcept
        : stream_(&stream), max_frame_(max_frame) {}

    /// Writes the 4-byte length, then `payload` (two writes: a BufWriter below makes them one).
    /// io::FrameTooLong, before writing anything, above max_frame.
    Task<void> write_frame(std::span<const std::byte> payload) {
        if (payload.size() > max_frame_ || payload.size() > UINT32_MAX)
            throw FrameTooLong("eddy::io::FrameWriter: a payload of " + std::to_string(payload.size()) +
                               " bytes (max_frame " + std::to_string(max_frame_) + ")");
        const auto len = static_cast<std::uint32_t>(payload.size());
        const std::array<std::byte, 4> header{std::byte(len >> 24), std::byte(len >> 16), std::byte(len >> 8),
                                              std::byte(len)};
        co_await io::write_all(*stream_, header);
        co_await io::write_all(*stream_, payload);
    }

private:
    S* stream_;
    std::size_t max_frame_;
};

}  // namespace eddy::io
