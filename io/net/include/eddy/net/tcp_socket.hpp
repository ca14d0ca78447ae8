//! eddy/net/tcp_socket.hpp: net::TcpSocket, a TCP socket not yet listening or connected,
//! for the options that must be set before bind(2), listen(2) or connect(2).
//!
//!     auto s = eddy::net::TcpSocket::v6();
//!     s.set_reuseport(true);                  // one listener per process on one port
//!     s.set_only_v6(false);                   // IPv4 clients too, as ::ffff:a.b.c.d
//!     s.bind(eddy::net::SocketAddr::any_v6(8080));
//!     eddy::net::TcpListener listener = std::move(s).listen(1024);
//!
//!     auto c = eddy::net::TcpSocket::v4();
//!     c.bind(eddy::net::SocketAddr::parse("10.0.0.2:0"));    // the outgoing interface
//!     eddy::net::TcpStream conn = co_await std::move(c).connect(server);
//!
//! listen() and connect() consume the socket (call them on an rvalue). Every setter is one
//! setsockopt: std::system_error naming the option and carrying the errno. bind() names the
//! address (EADDRINUSE, EADDRNOTAVAIL, EACCES), connect() the peer (ECONNREFUSED, ...).
//! connect() is cancelled by its std::stop_token like TcpStream::connect.
//! @file
#pragma once

#include <stop_token>

#include <eddy/io/file_descriptor.hpp>
#include <eddy/net/socket_addr.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/net/tcp_stream.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::net {

/// A TCP socket being set up (see the file comment). Move-only; closes on destruction.
class TcpSocket {
public:
    static TcpSocket v4();  ///< a new IPv4 TCP socket (std::system_error, e.g. EMFILE)
    static TcpSocket v6();  ///< a new IPv6 TCP socket (std::system_error, e.g. EAFNOSUPPORT)
    /// v4() or v6(), whichever `addr`'s family is.
    static TcpSocket for_address(const SocketAddr& addr);

    /// SO_REUSEADDR: bind while old connections on the port linger in TIME_WAIT.
    void set_reuseaddr(bool on);
    bool reuseaddr() const;  ///< SO_REUSEADDR as set now
    /// SO_REUSEPORT: several sockets bound to one address (each must set it); the kernel
    /// spreads new connections over the listeners.
    void set_reuseport(bool on);
    bool reuseport() const;  ///< SO_REUSEPORT as set now
    /// IPV6_V6ONLY (an IPv6 socket only, before bind): true, IPv6 only; false, IPv4 peers too.
    void set_only_v6(bool on);
    bool only_v6() const;  ///< IPV6_V6ONLY as set now
    /// SO_SNDBUF (see eddy/net/socket_options.hpp for what the kernel reports).
    void set_send_buffer_size(int bytes);
    int send_buffer_size() const;  ///< SO_SNDBUF as the kernel reports it
    /// SO_RCVBUF; set before listen() or connect() it sizes the TCP window offered.
    void set_recv_buffer_size(int bytes);
    int recv_buffer_size() const;  ///< SO_RCVBUF as the kernel reports it
    /// TCP_NODELAY, kept by the connection connect() makes and by the connections a listener
    /// made with listen() accepts. On from v4()/v6() (eddy's default, see TcpStream).
    void set_nodelay(bool on);

    /// bind(2): the local address (a listener's, or an outgoing connection's source address
    /// and port; port 0 picks a free one). std::system_error naming `addr`.
    void bind(const SocketAddr& addr);
    /// The address it is bound to (with the port the kernel chose for port 0).
    SocketAddr local_address() const;

    /// listen(2): the socket becomes a TcpListener (non-blocking, like TcpListener::bind's).
    /// Without a bind() before, the kernel picks a free port on every address.
    TcpListener listen(int backlog = 1024) &&;
    /// connect(2) to `addr`: the socket becomes a TcpStream. The socket is taken at the call,
    /// so the TcpSocket may go before the task is awaited.
    Task<TcpStream> connect(SocketAddr addr, std::stop_token token = {}) &&;

    int native_handle() const noexcept { return fd_.get(); }  ///< the descriptor, still owned by this object

private:
    explicit TcpSocket(io::FileDescriptor fd) noexcept : fd_(std::move(fd)) {}
    io::FileDescriptor fd_;
};

}  // namespace eddy::net
