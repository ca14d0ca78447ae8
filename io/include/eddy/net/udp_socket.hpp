// eddy/net/udp_socket.hpp: net::UdpSocket, a datagram socket (IPv4 or IPv6).
//
//     auto sock = eddy::net::UdpSocket::bind(eddy::net::SocketAddr::loopback_v4(0));
//     co_await sock.send_to(bytes, peer);
//     auto [n, from] = co_await sock.recv_from(buf);   // a longer datagram is truncated to buf
//
// Errors are std::system_error carrying the errno.
#pragma once

#include <cstddef>
#include <span>
#include <stop_token>

#include <eddy/io/file_descriptor.hpp>
#include <eddy/net/socket_addr.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::net {

class UdpSocket {
public:
    struct Received {
        std::size_t size;  // bytes stored in the buffer
        SocketAddr from;
    };

    /// std::system_error on failure (EADDRINUSE, ...).
    static UdpSocket bind(const SocketAddr& addr);

    /// Sends one datagram; returns the bytes sent.
    Task<std::size_t> send_to(std::span<const std::byte> data, SocketAddr to, std::stop_token token = {});
    /// Receives one datagram.
    Task<Received> recv_from(std::span<std::byte> buf, std::stop_token token = {});

    SocketAddr local_address() const;
    /// Closes the socket. A recv_from pending in another task is not woken by this (an
    /// operation in flight keeps the socket alive in the kernel): cancel it through its
    /// stop_token first.
    void close() { fd_.close(); }
    int native_handle() const noexcept { return fd_.get(); }

private:
    explicit UdpSocket(io::FileDescriptor fd) noexcept : fd_(std::move(fd)) {}
    io::FileDescriptor fd_;
};

} // namespace eddy::net
