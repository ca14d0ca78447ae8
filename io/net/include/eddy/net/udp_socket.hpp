//! eddy/net/udp_socket.hpp: net::UdpSocket, a datagram socket (IPv4 or IPv6).
//!
//!     auto sock = eddy::net::UdpSocket::bind(eddy::net::SocketAddr::loopback_v4(0));
//!     co_await sock.send_to(bytes, peer);
//!     auto got = co_await sock.recv_from(buf);   // got.size, got.from, got.truncated
//!     sock.connect(peer);  co_await sock.send(bytes);  co_await sock.recv(buf);
//!
//! A datagram longer than the buffer is cut to it, and `truncated` says so. Errors are
//! std::system_error carrying the errno (on a connected socket, ECONNREFUSED from a send or
//! receive after the peer's port answered with ICMP "port unreachable").
//! @file
#pragma once

#include <cstddef>
#include <span>
#include <stop_token>

#include <eddy/io/file_descriptor.hpp>
#include <eddy/net/socket_addr.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::net {

/// A UDP socket, IPv4 or IPv6 (see the file comment). Move-only; closes on destruction.
class UdpSocket {
public:
    /// What one receive got.
    struct Received {
        std::size_t size;        ///< bytes stored in the buffer
        SocketAddr from;         ///< the sender
        bool truncated = false;  ///< the datagram was longer than the buffer
    };

    /// std::system_error on failure (EADDRINUSE, ...).
    static UdpSocket bind(const SocketAddr& addr);
    /// Adopts an IPv4 or IPv6 UDP socket made elsewhere (systemd's, net::listen_fds()): takes
    /// ownership of `fd`, checks it (std::system_error EBADF, ENOTSOCK, or EINVAL naming what
    /// it is instead; `fd` is closed then) and makes it close-on-exec and blocking, as
    /// bind()'s sockets are.
    static UdpSocket from_fd(io::FileDescriptor fd);

    /// Sends one datagram; returns the bytes sent.
    Task<std::size_t> send_to(std::span<const std::byte> data, SocketAddr to, std::stop_token token = {});
    /// Receives one datagram.
    Task<Received> recv_from(std::span<std::byte> buf, std::stop_token token = {});
    /// Sets the default destination (connect(2)); then only its datagrams are received.
    void connect(const SocketAddr& peer);
    /// One datagram to the connected peer; returns the bytes sent.
    Task<std::size_t> send(std::span<const std::byte> data, std::stop_token token = {});
    /// One datagram from the connected peer (or anyone, if not connected).
    Task<Received> recv(std::span<std::byte> buf, std::stop_token token = {}) {
        return recv_from(buf, std::move(token));
    }

    SocketAddr local_address() const;  ///< the address it is bound to (with the port the kernel chose for port 0)
    /// Closes the socket. A recv_from pending in another task is not woken by this (an
    /// operation in flight keeps the socket alive in the kernel): cancel it through its
    /// stop_token first.
    void close() { fd_.close(); }
    int native_handle() const noexcept { return fd_.get(); }  ///< the socket's descriptor, still owned by this object

private:
    explicit UdpSocket(io::FileDescriptor fd) noexcept : fd_(std::move(fd)) {}
    io::FileDescriptor fd_;
};

}  // namespace eddy::net
