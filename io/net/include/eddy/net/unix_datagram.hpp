//! eddy/net/unix_datagram.hpp: net::UnixDatagram, a Unix domain datagram socket: messages
//! keep their boundaries, and a local peer cannot lose them.
//!
//!     auto sock = eddy::net::UnixDatagram::bind(eddy::net::UnixAddr::abstract("metrics"));
//!     auto got = co_await sock.recv_from(buf);       // got.size, got.from, got.truncated
//!     co_await sock.send_to(bytes, got.from);
//!
//! A datagram longer than the buffer is cut to it, and `truncated` says so. Errors are
//! std::system_error with the errno (ECONNREFUSED or ENOENT sending to nobody, EADDRINUSE
//! binding a path that exists); cancellation as for every socket operation.
//! @file
#pragma once

#include <cstddef>
#include <span>
#include <stop_token>
#include <utility>

#include <eddy/net/detail/socket_io.hpp>
#include <eddy/io/file_descriptor.hpp>
#include <eddy/net/unix_addr.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::net {

/// A Unix domain datagram socket: messages keep their boundaries (see the file comment).
/// Move-only; closes on destruction.
class UnixDatagram {
public:
    /// What one receive got.
    struct Received {
        std::size_t size;  ///< bytes stored in the buffer
        UnixAddr from;     ///< unnamed when the sender never bound an address
        bool truncated;    ///< the datagram was longer than the buffer
    };

    /// A socket bound to `addr` (a path or an abstract name). std::system_error: EADDRINUSE when
    /// the path exists, EACCES, ...
    static UnixDatagram bind(const UnixAddr& addr);
    /// A socket with no address of its own (it can send; replies cannot reach it unless it
    /// is connected or paired).
    static UnixDatagram unbound();
    /// Two connected sockets (socketpair(2)).
    static std::pair<UnixDatagram, UnixDatagram> pair();

    /// Sets the default destination (connect(2)): send() and recv() then talk to it alone.
    void connect(const UnixAddr& addr);

    /// Sends one datagram to `to`: all of `data` or nothing (std::system_error: EMSGSIZE when too
    /// long for the socket, ECONNREFUSED or ENOENT when nobody is bound there).
    Task<std::size_t> send_to(std::span<const std::byte> data, const UnixAddr& to, std::stop_token token = {});
    /// Receives one datagram into `buf`, with its sender.
    Task<Received> recv_from(std::span<std::byte> buf, std::stop_token token = {});
    /// To the connected peer.
    Task<std::size_t> send(std::span<const std::byte> data, std::stop_token token = {});
    /// From the connected peer (or anyone, if not connected).
    Task<Received> recv(std::span<std::byte> buf, std::stop_token token = {}) {
        return recv_from(buf, std::move(token));
    }

    /// The address it is bound to (unnamed for an unbound() one).
    UnixAddr local_address() const;
    /// Closes now; a receive pending in another task ends (its size 0).
    void close() { io_.close(); }
    int native_handle() const noexcept { return io_.fd(); }  ///< the socket's descriptor, still owned by this object

private:
    explicit UnixDatagram(io::FileDescriptor fd) noexcept : io_(std::move(fd)) {}
    eddy::detail::SocketIo io_;
};

}  // namespace eddy::net
