//! eddy/io/stream.hpp: what a byte stream is, for the code that works on any of them
//! (io::BufReader, io::BufWriter, the frame codecs, tls::Stream).
//!
//!     template <eddy::io::AsyncReadStream S>
//!     eddy::Task<std::size_t> count_bytes(S& s) {
//!         std::array<std::byte, 4096> buf;
//!         std::size_t total = 0;
//!         while (std::size_t n = co_await s.read(buf)) total += n;
//!         co_return total;
//!     }
//!
//! A concept, not a base class: the stream's own awaiter is inlined into the caller, so
//! code generic over streams costs nothing over code written for one of them.
//!
//! The contract, as TcpStream keeps it:
//!   - `co_await s.read(buf)` reads what is available, at least one byte unless `buf` is
//!     empty, and gives the count; 0 means end of stream. Errors throw std::system_error
//!     carrying the errno; a cancelled read throws eddy::OperationCancelled and has consumed
//!     nothing.
//!   - `co_await s.write(data)` writes some of `data`, at least one byte unless it is empty,
//!     and gives the count.
//!   - Buffers stay valid until the co_await returns.
//! @file
#pragma once

#include <concepts>
#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>

#include <eddy/tasks/detail/await_trace.hpp>  // detail::awaiter_of

namespace eddy::io {

/// What `co_await a` gives, for an awaitable `a` of type A (an awaiter, or a type with a
/// member operator co_await such as Task<T>).
template <class A>
using await_result_t = decltype(detail::awaiter_of(std::declval<A>()).await_resume());

/// An awaitable whose co_await gives a count of bytes.
template <class A>
concept AwaitableCount = requires {
    typename await_result_t<A>;
}
&&std::convertible_to<await_result_t<A>, std::size_t>;

/// A stream that can be read: `co_await s.read(std::span<std::byte>)` gives the bytes read,
/// 0 at end of stream.
template <class S>
concept AsyncReadStream = requires(S& s, std::span<std::byte> buf) {
    { s.read(buf) } -> AwaitableCount;
};

/// A stream that can be written: `co_await s.write(std::span<const std::byte>)` gives the
/// bytes written (at least one unless the span is empty).
template <class S>
concept AsyncWriteStream = requires(S& s, std::span<const std::byte> data) {
    { s.write(data) } -> AwaitableCount;
};

/// Both.
template <class S>
concept AsyncStream = AsyncReadStream<S> && AsyncWriteStream<S>;

}  // namespace eddy::io
