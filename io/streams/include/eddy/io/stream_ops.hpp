//! eddy/io/stream_ops.hpp: the loops every user of a byte stream writes, once, for any stream
//! (eddy/io/stream.hpp):
//!
//!     co_await eddy::io::write_all(stream, bytes);   // until every byte is out
//!     co_await eddy::io::read_exact(stream, buf);    // until buf is full
//!
//! write_all uses the stream's own write_all when it has one (TcpStream's loops inside one
//! awaiter, without a coroutine frame per call); otherwise it calls write() until done.
//! Errors: the stream's; read_exact throws io::UnexpectedEof (ENODATA) when the stream ends
//! first, and write_all a std::system_error with EPIPE when a write takes nothing (a stream
//! that will never take the rest). After an error, how much went through is unknown.
//! @file
#pragma once

#include <cerrno>
#include <cstddef>
#include <span>
#include <string>
#include <system_error>

#include <eddy/io/stream.hpp>
#include <eddy/io/stream_errors.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::io {

template <AsyncWriteStream S>
/// Writes all of `data` to `stream` (its own write_all when it has one); std::system_error
/// with EPIPE if a write takes nothing.
Task<void> write_all(S& stream, std::span<const std::byte> data) {
    if constexpr (requires { stream.write_all(data); }) {
        co_await stream.write_all(data);
    } else {
        while (!data.empty()) {
            const std::size_t n = co_await stream.write(data);
            if (n == 0)
                throw std::system_error(EPIPE, std::generic_category(), "eddy::io::write_all: the stream took nothing");
            data = data.subspan(n);
        }
    }
}

template <AsyncReadStream S>
/// Fills `buf` from `stream`; io::UnexpectedEof if the stream ends first.
Task<void> read_exact(S& stream, std::span<std::byte> buf) {
    for (std::size_t got = 0; got < buf.size();) {
        const std::size_t n = co_await stream.read(buf.subspan(got));
        if (n == 0)
            throw UnexpectedEof("eddy::io::read_exact: the stream ended after " + std::to_string(got) + " of " +
                                std::to_string(buf.size()) + " bytes");
        got += n;
    }
}

}  // namespace eddy::io
