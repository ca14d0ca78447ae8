//! eddy/net/tcp_listener.hpp: net::TcpListener, a listening TCP socket.
//!
//!     auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(8080));
//!     for (;;) eddy::spawn(serve(co_await listener.accept()));
//!
//! bind() sets SO_REUSEADDR (a restarted server can bind while old connections linger in
//! TIME_WAIT), binds and listens. Port 0 picks a free port: see local_address(). accept()
//! throws std::system_error carrying the errno (EMFILE when out of descriptors, ...).
//! @file
#pragma once

#include <stop_token>
#include <utility>

#include <eddy/net/detail/socket_io.hpp>
#include <eddy/io/file_descriptor.hpp>
#include <eddy/net/socket_addr.hpp>
#include <eddy/net/socket_options.hpp>
#include <eddy/net/tcp_stream.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::net {

class TcpSocket;

/// A listening TCP socket, IPv4 or IPv6 (see the file comment). Move-only; closes on
/// destruction.
class TcpListener {
public:
    /// std::system_error on failure (EADDRINUSE, EACCES, ...). SO_REUSEADDR is always set
    /// (a restarted server binds while old connections linger in TIME_WAIT), and TCP_NODELAY,
    /// which every accepted connection inherits (eddy's default: see TcpStream::set_nodelay).
    static TcpListener bind(const SocketAddr& addr, int backlog = 1024);
    /// With SO_REUSEPORT, IPV6_V6ONLY, SO_RCVBUF and the backlog of `options`.
    static TcpListener bind(const SocketAddr& addr, const ListenOptions& options);
    /// Adopts a listening TCP socket made elsewhere (systemd's, net::listen_fds(), a parent
    /// process's): takes ownership of `fd`, checks it is a listening IPv4 or IPv6 TCP socket
    /// and makes it close-on-exec and non-blocking. std::system_error naming what was
    /// expected and what was found: EBADF (not open), ENOTSOCK (a pipe, a file), EINVAL (a
    /// UDP or Unix socket, a TCP socket that is not listening); `fd` is closed then. Its
    /// options stay as they were: its connections inherit its TCP_NODELAY (systemd's
    /// NoDelay=, off unless the unit says so).
    static TcpListener from_fd(io::FileDescriptor fd);

    /// The next connection.
    Task<TcpStream> accept(std::stop_token token = {});
    /// The next connection and its peer's address.
    Task<std::pair<TcpStream, SocketAddr>> accept_with_address(std::stop_token token = {});

    SocketAddr local_address() const;  ///< the address it listens on (with the port the kernel chose for port 0)
    /// Stops listening now; an accept pending in another task fails (EINVAL). It shuts the
    /// socket down (SHUT_RD) for every process that shares it: a server handing its listener
    /// over to another process lets the listener go out of scope (destruction only closes
    /// this descriptor) instead.
    void close();
    int native_handle() const noexcept {
        return io_.fd();
    }  ///< the listening socket's descriptor, still owned by this object

private:
    friend class TcpSocket;
    explicit TcpListener(io::FileDescriptor fd) noexcept : io_(std::move(fd)) {}
    detail::SocketIo io_;
};

}  // namespace eddy::net
