// io/net/tcp_socket.cpp: net::TcpSocket (eddy/net/tcp_socket.hpp).
#include <eddy/net/tcp_socket.hpp>

#include <eddy/io/detail/io_awaiter.hpp>

#include "net/socket_util.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <string>
#include <system_error>

namespace eddy::net {
namespace {

constexpr const char* kOpt = "eddy::net::TcpSocket::set_option";

/// Connects `fd` (taken by value: the frame owns it from the call on).
Task<TcpStream> connect_socket(io::FileDescriptor fd, SocketAddr addr, std::stop_token token) {
    const std::string what = "eddy::net::TcpSocket::connect(" + addr.to_string() + ")";
    co_await detail::IoAwaiter({.kind = detail::IoKind::kConnect,
                                .fd = fd.get(),
                                .addr = const_cast<sockaddr*>(addr.native()),
                                .len = addr.native_size()},
                               what.c_str(), std::move(token));
    co_return TcpStream(std::move(fd));
}

}  // namespace

TcpSocket TcpSocket::v4() {
    return TcpSocket(detail::new_tcp_socket(AF_INET, SOCK_STREAM, "eddy::net::TcpSocket::v4"));
}

TcpSocket TcpSocket::v6() {
    return TcpSocket(detail::new_tcp_socket(AF_INET6, SOCK_STREAM, "eddy::net::TcpSocket::v6"));
}

TcpSocket TcpSocket::for_address(const SocketAddr& addr) { return addr.is_v6() ? v6() : v4(); }

void TcpSocket::set_reuseaddr(bool on) {
    detail::set_int_option(fd_.get(), SOL_SOCKET, SO_REUSEADDR, on ? 1 : 0, "eddy::net::TcpSocket::set_reuseaddr");
}
bool TcpSocket::reuseaddr() const { return detail::get_int_option(fd_.get(), SOL_SOCKET, SO_REUSEADDR, kOpt) != 0; }

void TcpSocket::set_reuseport(bool on) {
    detail::set_int_option(fd_.get(), SOL_SOCKET, SO_REUSEPORT, on ? 1 : 0, "eddy::net::TcpSocket::set_reuseport");
}
bool TcpSocket::reuseport() const { return detail::get_int_option(fd_.get(), SOL_SOCKET, SO_REUSEPORT, kOpt) != 0; }

void TcpSocket::set_only_v6(bool on) {
    detail::set_int_option(fd_.get(), IPPROTO_IPV6, IPV6_V6ONLY, on ? 1 : 0, "eddy::net::TcpSocket::set_only_v6");
}
bool TcpSocket::only_v6() const { return detail::get_int_option(fd_.get(), IPPROTO_IPV6, IPV6_V6ONLY, kOpt) != 0; }

void TcpSocket::set_send_buffer_size(int bytes) {
    detail::set_int_option(fd_.get(), SOL_SOCKET, SO_SNDBUF, bytes, "eddy::net::TcpSocket::set_send_buffer_size");
}
int TcpSocket::send_buffer_size() const { return detail::get_int_option(fd_.get(), SOL_SOCKET, SO_SNDBUF, kOpt); }

void TcpSocket::set_recv_buffer_size(int bytes) {
    detail::set_int_option(fd_.get(), SOL_SOCKET, SO_RCVBUF, bytes, "eddy::net::TcpSocket::set_recv_buffer_size");
}
int TcpSocket::recv_buffer_size() const { return detail::get_int_option(fd_.get(), SOL_SOCKET, SO_RCVBUF, kOpt); }

void TcpSocket::set_nodelay(bool on) {
    detail::set_int_option(fd_.get(), IPPROTO_TCP, TCP_NODELAY, on ? 1 : 0, "eddy::net::TcpSocket::set_nodelay");
}

void TcpSocket::bind(const SocketAddr& addr) {
    if (::bind(fd_.get(), addr.native(), addr.native_size()) != 0)
        detail::throw_errno(("eddy::net::TcpSocket::bind(" + addr.to_string() + ")").c_str());
}

SocketAddr TcpSocket::local_address() const {
    return detail::local_address_of(fd_.get(), "eddy::net::TcpSocket::local_address");
}

TcpListener TcpSocket::listen(int backlog) && {
    if (::listen(fd_.get(), backlog) != 0) detail::throw_errno("eddy::net::TcpSocket::listen");
    // Non-blocking, as TcpListener::bind's: accept4 runs on the workers.
    const int flags = ::fcntl(fd_.get(), F_GETFL);
    if (flags < 0 || ::fcntl(fd_.get(), F_SETFL, flags | O_NONBLOCK) != 0)
        detail::throw_errno("eddy::net::TcpSocket::listen: O_NONBLOCK");
    return TcpListener(std::move(fd_));
}

Task<TcpStream> TcpSocket::connect(SocketAddr addr, std::stop_token token) && {
    return connect_socket(std::move(fd_), addr, std::move(token));
}

}  // namespace eddy::net
