// io/net/socket_util.hpp: the synchronous socket calls the socket types share.
#pragma once

#include "private.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>

#include <eddy/io/detail/operation.hpp>  // throw_errno
#include <eddy/io/file_descriptor.hpp>
#include <eddy/net/socket_addr.hpp>

namespace eddy::detail {

/// A new close-on-exec socket of `family` and `type` (std::system_error, e.g. EMFILE).
io::FileDescriptor new_socket(int family, int type, const char* what);
/// A new TCP socket (`type`: SOCK_STREAM, with SOCK_NONBLOCK or not) with TCP_NODELAY on,
/// eddy's default for every TCP socket it makes (docs/guide/05-network.md, "Nagle"). A
/// listener's connections inherit it from the listener (Linux copies the option to each
/// accepted socket), so accept() pays nothing for it.
io::FileDescriptor new_tcp_socket(int family, int type, const char* what);
/// getsockname (`peer` false) or getpeername (`peer` true) as an Addr with a from_native
/// (net::SocketAddr, net::UnixAddr); std::system_error, e.g. ENOTCONN.
template <class Addr>
Addr socket_name(int fd, bool peer, const char* what) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    auto* sa = reinterpret_cast<sockaddr*>(&ss);
    if ((peer ? ::getpeername(fd, sa, &len) : ::getsockname(fd, sa, &len)) != 0) throw_errno(what);
    return Addr::from_native(sa, len);
}
inline net::SocketAddr local_address_of(int fd, const char* what) {
    return socket_name<net::SocketAddr>(fd, false, what);
}
inline net::SocketAddr peer_address_of(int fd, const char* what) {
    return socket_name<net::SocketAddr>(fd, true, what);
}
/// Closes a socket so that reads and accepts pending on it end: shutdown(SHUT_RD) first (a
/// pending read then returns 0, a pending accept fails with EINVAL), since an operation in
/// flight keeps the socket open in the kernel past close(2). std::system_error from close.
void close_socket(io::FileDescriptor& fd);
/// One buffer and an address as the msghdr of a recvmsg/sendmsg (datagrams). It points into
/// itself, so it cannot move: declare it where the operation is awaited.
struct OneBufferMessage {
    iovec iov;
    msghdr msg{};
    OneBufferMessage(const void* data, std::size_t len, const void* name, socklen_t namelen) noexcept
        : iov{const_cast<void*>(data), len} {
        msg.msg_name = const_cast<void*>(name);
        msg.msg_namelen = namelen;
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
    }
    OneBufferMessage(const OneBufferMessage&) = delete;
    OneBufferMessage& operator=(const OneBufferMessage&) = delete;
};

/// What from_fd expects of a descriptor it adopts.
struct ExpectedSocket {
    int family;            ///< AF_INET6 with `either_ip`: AF_INET or AF_INET6
    bool either_ip;        ///< AF_INET or AF_INET6
    int type;              ///< SOCK_STREAM, SOCK_DGRAM
    int protocol;          ///< IPPROTO_TCP, IPPROTO_UDP, 0 (any)
    bool listening;        ///< SO_ACCEPTCONN set (true) or clear (false)
    const char* expected;  ///< in the message: "a listening TCP socket"
};
/// What each socket type's from_fd adopts.
inline constexpr ExpectedSocket kTcpListenerSocket{AF_INET,     true, SOCK_STREAM,
                                                   IPPROTO_TCP, true, "a listening TCP socket"};
inline constexpr ExpectedSocket kTcpStreamSocket{AF_INET,     true,  SOCK_STREAM,
                                                 IPPROTO_TCP, false, "a TCP socket that is not listening"};
inline constexpr ExpectedSocket kUdpSocket{AF_INET, true, SOCK_DGRAM, IPPROTO_UDP, false, "a UDP socket"};
inline constexpr ExpectedSocket kUnixListenerSocket{AF_UNIX, false, SOCK_STREAM,
                                                    0,       true,  "a listening Unix stream socket"};
/// Checks that `fd` is the socket `want` describes (SO_DOMAIN, SO_TYPE, SO_PROTOCOL,
/// SO_ACCEPTCONN), then sets close-on-exec and O_NONBLOCK (`nonblocking`) or clears it, as
/// the socket types' own sockets are. std::system_error naming `what`, the descriptor, what
/// was expected and what was found: EBADF (not open), ENOTSOCK (not a socket), EINVAL (the
/// wrong kind of socket). The descriptor is closed on failure (it was given away).
io::FileDescriptor adopt_socket(io::FileDescriptor fd, const ExpectedSocket& want, bool nonblocking, const char* what);

/// setsockopt / getsockopt of an int option (std::system_error).
void set_int_option(int fd, int level, int name, int value, const char* what);
int get_int_option(int fd, int level, int name, const char* what);

}  // namespace eddy::detail
