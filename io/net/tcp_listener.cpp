// io/net/tcp_listener.cpp
#include <eddy/net/tcp_listener.hpp>

#include "net/socket_util.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

namespace eddy::net {

TcpListener TcpListener::bind(const SocketAddr& addr, int backlog) {
    return bind(addr, ListenOptions{.backlog = backlog});
}

TcpListener TcpListener::bind(const SocketAddr& addr, const ListenOptions& options) {
    // Non-blocking: accept4 runs on the workers and must never block one.
    io::FileDescriptor fd =
        detail::new_tcp_socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK, "eddy::net::TcpListener::bind");
    detail::set_int_option(fd.get(), SOL_SOCKET, SO_REUSEADDR, 1, "eddy::net::TcpListener::bind: SO_REUSEADDR");
    if (options.reuse_port)
        detail::set_int_option(fd.get(), SOL_SOCKET, SO_REUSEPORT, 1, "eddy::net::TcpListener::bind: SO_REUSEPORT");
    if (options.only_v6 && addr.is_v6())
        detail::set_int_option(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, *options.only_v6 ? 1 : 0,
                               "eddy::net::TcpListener::bind: IPV6_V6ONLY");
    if (options.recv_buffer_size)
        detail::set_int_option(fd.get(), SOL_SOCKET, SO_RCVBUF, *options.recv_buffer_size,
                               "eddy::net::TcpListener::bind: SO_RCVBUF");
    if (::bind(fd.get(), addr.native(), addr.native_size()) != 0) detail::throw_errno("eddy::net::TcpListener::bind");
    if (::listen(fd.get(), options.backlog) != 0) detail::throw_errno("eddy::net::TcpListener::bind: listen");
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

TcpListener TcpListener::from_fd(io::FileDescriptor fd) {
    // Non-blocking, as bind()'s: accept4 runs on the workers and must never block one.
    return TcpListener(
        detail::adopt_socket(std::move(fd), detail::kTcpListenerSocket, true, "eddy::net::TcpListener::from_fd"));
}

void TcpListener::close() { io_.close(); }

SocketAddr TcpListener::local_address() const {
    return detail::local_address_of(io_.fd(), "eddy::net::TcpListener::local_address");
}

}  // namespace eddy::net
