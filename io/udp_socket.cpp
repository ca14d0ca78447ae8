// io/udp_socket.cpp
#include <eddy/net/udp_socket.hpp>

#include "io/socket_util.hpp"

#include <sys/socket.h>
#include <sys/uio.h>

#include <eddy/io/detail/io_awaiter.hpp>

namespace eddy::net {

UdpSocket UdpSocket::bind(const SocketAddr& addr) {
    io::FileDescriptor fd = detail::new_socket(addr.family(), SOCK_DGRAM, "eddy::net::UdpSocket::bind");
    if (::bind(fd.get(), addr.native(), addr.native_size()) != 0) detail::throw_errno("eddy::net::UdpSocket::bind");
    return UdpSocket(std::move(fd));
}

Task<std::size_t> UdpSocket::send_to(std::span<const std::byte> data, SocketAddr to, std::stop_token token) {
    iovec iov{const_cast<std::byte*>(data.data()), data.size()};
    msghdr msg{};
    msg.msg_name = const_cast<sockaddr*>(to.native());
    msg.msg_namelen = to.native_size();
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    co_return co_await detail::IoAwaiter({.kind = detail::IoKind::kSendMsg, .fd = fd_.get(), .addr = &msg},
                                         "eddy::net::UdpSocket::send_to", std::move(token));
}

Task<UdpSocket::Received> UdpSocket::recv_from(std::span<std::byte> buf, std::stop_token token) {
    sockaddr_storage from{};
    iovec iov{buf.data(), buf.size()};
    msghdr msg{};
    msg.msg_name = &from;
    msg.msg_namelen = sizeof from;
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    const std::size_t n = co_await detail::IoAwaiter({.kind = detail::IoKind::kRecvMsg, .fd = fd_.get(), .addr = &msg},
                                                     "eddy::net::UdpSocket::recv_from", std::move(token));
    co_return Received{n, SocketAddr::from_native(reinterpret_cast<sockaddr*>(&from), msg.msg_namelen)};
}

SocketAddr UdpSocket::local_address() const {
    return detail::local_address_of(fd_.get(), "eddy::net::UdpSocket::local_address");
}

} // namespace eddy::net
