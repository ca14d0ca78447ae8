// io/net/udp_socket.cpp
#include <eddy/net/udp_socket.hpp>

#include "net/socket_util.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <eddy/io/detail/io_awaiter.hpp>

namespace eddy::net {

UdpSocket UdpSocket::bind(const SocketAddr& addr) { return bind(addr, UdpOptions{}); }

UdpSocket UdpSocket::bind(const SocketAddr& addr, const UdpOptions& options) {
    io::FileDescriptor fd = detail::new_socket(addr.family(), SOCK_DGRAM, "eddy::net::UdpSocket::bind");
    if (options.reuse_address)
        detail::set_int_option(fd.get(), SOL_SOCKET, SO_REUSEADDR, 1, "eddy::net::UdpSocket::bind: SO_REUSEADDR");
    if (options.reuse_port)
        detail::set_int_option(fd.get(), SOL_SOCKET, SO_REUSEPORT, 1, "eddy::net::UdpSocket::bind: SO_REUSEPORT");
    if (options.only_v6 && addr.is_v6())
        detail::set_int_option(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, *options.only_v6 ? 1 : 0,
                               "eddy::net::UdpSocket::bind: IPV6_V6ONLY");
    if (options.recv_buffer_size)
        detail::set_int_option(fd.get(), SOL_SOCKET, SO_RCVBUF, *options.recv_buffer_size,
                               "eddy::net::UdpSocket::bind: SO_RCVBUF");
    if (options.send_buffer_size)
        detail::set_int_option(fd.get(), SOL_SOCKET, SO_SNDBUF, *options.send_buffer_size,
                               "eddy::net::UdpSocket::bind: SO_SNDBUF");
    if (::bind(fd.get(), addr.native(), addr.native_size()) != 0) detail::throw_errno("eddy::net::UdpSocket::bind");
    return UdpSocket(std::move(fd));
}

int UdpSocket::recv_buffer_size() const {
    return detail::get_int_option(fd_.get(), SOL_SOCKET, SO_RCVBUF, "eddy::net::UdpSocket::recv_buffer_size");
}

int UdpSocket::send_buffer_size() const {
    return detail::get_int_option(fd_.get(), SOL_SOCKET, SO_SNDBUF, "eddy::net::UdpSocket::send_buffer_size");
}

UdpSocket UdpSocket::from_fd(io::FileDescriptor fd) {
    return UdpSocket(detail::adopt_socket(std::move(fd), detail::kUdpSocket, false, "eddy::net::UdpSocket::from_fd"));
}

Task<std::size_t> UdpSocket::send_to(std::span<const std::byte> data, SocketAddr to, std::stop_token token) {
    detail::OneBufferMessage m(data.data(), data.size(), to.native(), to.native_size());
    co_return co_await detail::IoAwaiter({.kind = detail::IoKind::kSendMsg, .fd = fd_.get(), .addr = &m.msg},
                                         "eddy::net::UdpSocket::send_to", std::move(token));
}

Task<UdpSocket::Received> UdpSocket::recv_from(std::span<std::byte> buf, std::stop_token token) {
    sockaddr_storage from{};
    detail::OneBufferMessage m(buf.data(), buf.size(), &from, sizeof from);
    const std::size_t n =
        co_await detail::IoAwaiter({.kind = detail::IoKind::kRecvMsg, .fd = fd_.get(), .addr = &m.msg},
                                   "eddy::net::UdpSocket::recv_from", std::move(token));
    co_return Received{n, SocketAddr::from_native(reinterpret_cast<sockaddr*>(&from), m.msg.msg_namelen),
                       (m.msg.msg_flags & MSG_TRUNC) != 0};
}

void UdpSocket::connect(const SocketAddr& peer) {
    if (::connect(fd_.get(), peer.native(), peer.native_size()) != 0)
        detail::throw_errno("eddy::net::UdpSocket::connect");
}

Task<std::size_t> UdpSocket::send(std::span<const std::byte> data, std::stop_token token) {
    detail::OneBufferMessage m(data.data(), data.size(), nullptr, 0);
    co_return co_await detail::IoAwaiter({.kind = detail::IoKind::kSendMsg, .fd = fd_.get(), .addr = &m.msg},
                                         "eddy::net::UdpSocket::send", std::move(token));
}

SocketAddr UdpSocket::local_address() const {
    return detail::local_address_of(fd_.get(), "eddy::net::UdpSocket::local_address");
}

}  // namespace eddy::net
