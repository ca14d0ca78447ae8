// io/tcp_listener.cpp
#include <eddy/net/tcp_listener.hpp>

#include "io/socket_util.hpp"

#include <sys/socket.h>

namespace eddy::net {

TcpListener TcpListener::bind(const SocketAddr& addr, int backlog) {
    // Non-blocking: accept4 runs on the workers and must never block one.
    io::FileDescriptor fd =
        detail::new_socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK, "eddy::net::TcpListener::bind");
    detail::set_int_option(fd.get(), SOL_SOCKET, SO_REUSEADDR, 1, "eddy::net::TcpListener::bind: SO_REUSEADDR");
    if (::bind(fd.get(), addr.native(), addr.native_size()) != 0)
        detail::throw_errno("eddy::net::TcpListener::bind");
    if (::listen(fd.get(), backlog) != 0) detail::throw_errno("eddy::net::TcpListener::bind: listen");
    return TcpListener(std::move(fd));
}

Task<TcpStream> TcpListener::accept(std::stop_token token) {
    const std::size_t fd = co_await detail::SocketAwaiter(io_, detail::SocketAwaiter::Op::kAccept, nullptr, 0,
                                                          "eddy::net::TcpListener::accept", std::move(token));
    co_return TcpStream(io::FileDescriptor(static_cast<int>(fd)));
}

Task<std::pair<TcpStream, SocketAddr>> TcpListener::accept_with_address(std::stop_token token) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    const std::size_t fd = co_await detail::SocketAwaiter(io_, detail::SocketAwaiter::Op::kAccept, &ss, 0,
                                                          "eddy::net::TcpListener::accept", std::move(token), &len);
    TcpStream s{io::FileDescriptor(static_cast<int>(fd))};
    co_return std::pair{std::move(s), SocketAddr::from_native(reinterpret_cast<sockaddr*>(&ss), len)};
}

void TcpListener::close() { io_.close(); }

SocketAddr TcpListener::local_address() const {
    return detail::local_address_of(io_.fd(), "eddy::net::TcpListener::local_address");
}

} // namespace eddy::net
