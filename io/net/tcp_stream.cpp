// io/net/tcp_stream.cpp
#include <eddy/net/tcp_stream.hpp>

#include <eddy/io/detail/io_awaiter.hpp>

#include "net/socket_util.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <string>
#include <system_error>

namespace eddy::net {

Task<TcpStream> TcpStream::connect(SocketAddr addr, std::stop_token token) {
    io::FileDescriptor fd = detail::new_tcp_socket(addr.family(), SOCK_STREAM, "eddy::net::TcpStream::connect");
    co_await detail::IoAwaiter({.kind = detail::IoKind::kConnect,
                                .fd = fd.get(),
                                .addr = const_cast<sockaddr*>(addr.native()),
                                .len = addr.native_size()},
                               "eddy::net::TcpStream::connect", std::move(token));
    co_return TcpStream(std::move(fd));
}

TcpStream TcpStream::from_fd(io::FileDescriptor fd) {
    return TcpStream(
        detail::adopt_socket(std::move(fd), detail::kTcpStreamSocket, false, "eddy::net::TcpStream::from_fd"));
}

Task<void> TcpStream::read_exact(std::span<std::byte> buf) {
    std::size_t got = 0;
    while (got < buf.size()) {
        const std::size_t n = co_await read(buf.subspan(got));
        if (n == 0)
            throw std::system_error(ENODATA, std::system_category(),
                                    "eddy::net::TcpStream::read_exact: the stream ended after " + std::to_string(got) +
                                        " of " + std::to_string(buf.size()) + " bytes");
        got += n;
    }
}

void TcpStream::close() { io_.close(); }

void TcpStream::shutdown(Shutdown how) {
    if (::shutdown(io_.fd(), static_cast<int>(how)) != 0) detail::throw_errno("eddy::net::TcpStream::shutdown");
}

void TcpStream::set_nodelay(bool on) {
    detail::set_int_option(io_.fd(), IPPROTO_TCP, TCP_NODELAY, on ? 1 : 0, "eddy::net::TcpStream::set_nodelay");
}

bool TcpStream::nodelay() const {
    return detail::get_int_option(io_.fd(), IPPROTO_TCP, TCP_NODELAY, "eddy::net::TcpStream::nodelay") != 0;
}

void TcpStream::set_keepalive(std::optional<Keepalive> k) {
    constexpr const char* what = "eddy::net::TcpStream::set_keepalive";
    if (k) {
        detail::set_int_option(io_.fd(), IPPROTO_TCP, TCP_KEEPIDLE, static_cast<int>(k->idle.count()), what);
        detail::set_int_option(io_.fd(), IPPROTO_TCP, TCP_KEEPINTVL, static_cast<int>(k->interval.count()), what);
        detail::set_int_option(io_.fd(), IPPROTO_TCP, TCP_KEEPCNT, k->count, what);
    }
    detail::set_int_option(io_.fd(), SOL_SOCKET, SO_KEEPALIVE, k ? 1 : 0, what);
}

std::optional<Keepalive> TcpStream::keepalive() const {
    constexpr const char* what = "eddy::net::TcpStream::keepalive";
    if (detail::get_int_option(io_.fd(), SOL_SOCKET, SO_KEEPALIVE, what) == 0) return std::nullopt;
    return Keepalive{
        .idle = std::chrono::seconds(detail::get_int_option(io_.fd(), IPPROTO_TCP, TCP_KEEPIDLE, what)),
        .interval = std::chrono::seconds(detail::get_int_option(io_.fd(), IPPROTO_TCP, TCP_KEEPINTVL, what)),
        .count = detail::get_int_option(io_.fd(), IPPROTO_TCP, TCP_KEEPCNT, what)};
}

void TcpStream::set_linger(std::optional<std::chrono::seconds> linger) {
    const ::linger l{linger ? 1 : 0, linger ? static_cast<int>(linger->count()) : 0};
    if (::setsockopt(io_.fd(), SOL_SOCKET, SO_LINGER, &l, sizeof l) != 0)
        detail::throw_errno("eddy::net::TcpStream::set_linger");
}

std::optional<std::chrono::seconds> TcpStream::linger() const {
    ::linger l{};
    socklen_t len = sizeof l;
    if (::getsockopt(io_.fd(), SOL_SOCKET, SO_LINGER, &l, &len) != 0)
        detail::throw_errno("eddy::net::TcpStream::linger");
    if (l.l_onoff == 0) return std::nullopt;
    return std::chrono::seconds(l.l_linger);
}

void TcpStream::set_send_buffer_size(int bytes) {
    detail::set_int_option(io_.fd(), SOL_SOCKET, SO_SNDBUF, bytes, "eddy::net::TcpStream::set_send_buffer_size");
}
int TcpStream::send_buffer_size() const {
    return detail::get_int_option(io_.fd(), SOL_SOCKET, SO_SNDBUF, "eddy::net::TcpStream::send_buffer_size");
}
void TcpStream::set_recv_buffer_size(int bytes) {
    detail::set_int_option(io_.fd(), SOL_SOCKET, SO_RCVBUF, bytes, "eddy::net::TcpStream::set_recv_buffer_size");
}
int TcpStream::recv_buffer_size() const {
    return detail::get_int_option(io_.fd(), SOL_SOCKET, SO_RCVBUF, "eddy::net::TcpStream::recv_buffer_size");
}

SocketAddr TcpStream::peer_address() const {
    return detail::peer_address_of(io_.fd(), "eddy::net::TcpStream::peer_address");
}

SocketAddr TcpStream::local_address() const {
    return detail::local_address_of(io_.fd(), "eddy::net::TcpStream::local_address");
}

}  // namespace eddy::net
