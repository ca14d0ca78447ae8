//! eddy/net/tcp_stream.hpp: net::TcpStream, a connected TCP socket (IPv4 or IPv6).
//!
//!     auto s = co_await eddy::net::TcpStream::connect(eddy::net::SocketAddr::loopback_v4(port));
//!     co_await s.write_all(request);
//!     std::size_t n = co_await s.read(buf);        // 0: the peer closed its side
//!     co_await s.send_file(file, 0, size);         // an fs::File's bytes, copied by the kernel
//!
//! Every operation suspends only the calling task. Errors are std::system_error carrying the
//! errno (ECONNREFUSED from connect, ECONNRESET from read, EPIPE from write after the peer
//! reset, ...). The socket closes on destruction; close() closes now and reports errors.
//! Buffers passed to read/write must stay valid until the co_await returns. A stop
//! requested on the optional std::stop_token cancels a pending operation: it throws
//! std::errc::operation_canceled once the kernel has let go of the buffer.
//!
//! One reader and one writer at once: one task may read while another writes, on the same
//! worker or on two (each direction waits on its own queue of the socket's one poll:
//! eddy/net/detail/socket_io.hpp), so a full-duplex protocol needs no split of the stream:
//! share it by reference with both tasks, which it must outlive. Two reads at once are safe
//! but split the incoming bytes between them in an order nobody chose (each byte goes to
//! exactly one); two writes at once are safe too, but one write_all's bytes may land between
//! another's wherever the kernel took a partial send. So keep to one reader and one writer,
//! or take turns (an eddy::Mutex around the writes, or one writer task fed by a channel).
//! @file
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <stop_token>
#include <string_view>

#include <eddy/net/detail/socket_stream.hpp>
#include <eddy/io/file_descriptor.hpp>
#include <eddy/io/stream.hpp>
#include <eddy/net/socket_addr.hpp>
#include <eddy/net/socket_options.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::detail {
struct TcpStreamNames {
    static constexpr const char* kRead = "eddy::net::TcpStream::read";
    static constexpr const char* kWrite = "eddy::net::TcpStream::write";
    static constexpr const char* kWriteAll = "eddy::net::TcpStream::write_all";
    static constexpr const char* kReadVectored = "eddy::net::TcpStream::read_vectored";
    static constexpr const char* kWriteVectored = "eddy::net::TcpStream::write_vectored";
    static constexpr const char* kSendFile = "eddy::net::TcpStream::send_file";
    static constexpr const char* kReadable = "eddy::net::TcpStream::readable";
};
}  // namespace eddy::detail

namespace eddy::net {

/// A connected TCP socket (see the file comment). Move-only; closes on destruction.
/// read, write, write_all, read_vectored, write_vectored, readable and send_file come from its base (an
/// io::AsyncStream): `co_await s.read(buf)` gives the bytes read, 0 at end of stream.
class TcpStream : public eddy::detail::SocketStream<eddy::detail::TcpStreamNames> {
public:
    /// Connects to `addr` (std::system_error: ECONNREFUSED, ENETUNREACH, ...).
    static Task<TcpStream> connect(SocketAddr addr, std::stop_token token = {});
    /// Resolves "host:port" (net::lookup_host: numeric addresses skip the resolver) and
    /// connects to each address in turn until one accepts. net::ResolveError when the name
    /// does not resolve, net::ConnectError (eddy/net/connect_error.hpp) listing every
    /// attempt when no address accepts, std::invalid_argument for a text that is not
    /// "host:port".
    static Task<TcpStream> connect(std::string_view host_port, std::stop_token token = {});

    /// Adopts a connected stream socket.
    explicit TcpStream(io::FileDescriptor fd) noexcept : SocketStream(std::move(fd)) {}
    /// Adopts a TCP socket made elsewhere, checked: takes ownership of `fd`, checks it is an
    /// IPv4 or IPv6 TCP socket that is not listening (std::system_error EBADF, ENOTSOCK, or
    /// EINVAL naming what it is instead; `fd` is closed then), makes it close-on-exec and
    /// blocking, as connect()'s sockets are.
    static TcpStream from_fd(io::FileDescriptor fd);

    // read, write, write_all, read_vectored, write_vectored, readable, send_file: see eddy/net/detail/socket_stream.hpp

    /// Fills `buf` completely; std::system_error with ENODATA if the stream ends first.
    Task<void> read_exact(std::span<std::byte> buf);

    /// Which direction shutdown() ends.
    enum class Shutdown { kRead = 0, kWrite = 1, kBoth = 2 };
    /// Shuts down one or both directions (shutdown(2)): after kWrite the peer reads 0.
    void shutdown(Shutdown how = Shutdown::kWrite);
    /// Closes the socket now: the peer sees end of stream, a read pending on it in another
    /// task returns 0 and a write pending in another task fails with EPIPE.
    /// std::system_error on failure.
    void close();

    /// TCP_NODELAY: send small writes at once instead of coalescing them (Nagle). On by
    /// default for every stream eddy makes (connect(), a TcpListener's or a TcpSocket's
    /// connections); set_nodelay(false) turns Nagle's algorithm back on. A stream adopted
    /// with from_fd keeps what its descriptor had.
    void set_nodelay(bool on);
    bool nodelay() const;  ///< TCP_NODELAY as set now
    /// SO_KEEPALIVE with TCP_KEEPIDLE/KEEPINTVL/KEEPCNT; std::nullopt turns it off.
    void set_keepalive(std::optional<Keepalive> keepalive);
    std::optional<Keepalive> keepalive() const;  ///< the keepalive as set now (std::nullopt: off)
    /// SO_LINGER: close() waits up to that long for unsent data (0: close() resets the
    /// connection at once); std::nullopt, the default: close() returns at once, the kernel
    /// sends the rest.
    void set_linger(std::optional<std::chrono::seconds> linger);
    std::optional<std::chrono::seconds> linger() const;  ///< SO_LINGER as set now (std::nullopt: off)
    /// SO_SNDBUF / SO_RCVBUF (see eddy/net/socket_options.hpp for what the kernel reports).
    void set_send_buffer_size(int bytes);
    int send_buffer_size() const;          ///< SO_SNDBUF as the kernel reports it
    void set_recv_buffer_size(int bytes);  ///< SO_RCVBUF (see set_send_buffer_size)
    int recv_buffer_size() const;          ///< SO_RCVBUF as the kernel reports it
    SocketAddr peer_address() const;       ///< the peer's address (std::system_error ENOTCONN once it is gone)
    SocketAddr local_address() const;      ///< the address this end is bound to
};

static_assert(io::AsyncStream<TcpStream>);

}  // namespace eddy::net
