// io/tcp_stream.cpp
#include <eddy/net/tcp_stream.hpp>

#include <eddy/io/detail/io_awaiter.hpp>

#include "io/socket_util.hpp"

#include <netinet/tcp.h>
#include <sys/socket.h>

#include <string>
#include <system_error>

namespace eddy::net {

Task<TcpStream> TcpStream::connect(SocketAddr addr, std::stop_token token) {
    io::FileDescriptor fd = detail::new_socket(addr.family(), SOCK_STREAM, "eddy::net::TcpStream::connect");
    co_await detail::IoAwaiter({.kind = detail::IoKind::kConnect,
                                .fd = fd.get(),
                                .addr = const_cast<sockaddr*>(addr.native()),
                                .len = addr.native_size()},
                               "eddy::net::TcpStream::connect", std::move(token));
    co_return TcpStream(std::move(fd));
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

SocketAddr TcpStream::peer_address() const {
    return detail::peer_address_of(io_.fd(), "eddy::net::TcpStream::peer_address");
}

SocketAddr TcpStream::local_address() const {
    return detail::local_address_of(io_.fd(), "eddy::net::TcpStream::local_address");
}

} // namespace eddy::net
