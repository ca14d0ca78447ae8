// io/net/socket_util.cpp
#include "net/socket_util.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <string>
#include <system_error>

namespace eddy::detail {
namespace {

const char* family_name(int family) {
    switch (family) {
    case AF_INET:
        return "IPv4";
    case AF_INET6:
        return "IPv6";
    case AF_UNIX:
        return "Unix";
    default:
        return "other-family";
    }
}

std::string describe_socket(int family, int type, int protocol, bool listening) {
    std::string kind = type == SOCK_STREAM      ? "stream"
                       : type == SOCK_DGRAM     ? "datagram"
                       : type == SOCK_SEQPACKET ? "seqpacket"
                                                : "raw or other";
    std::string text = std::string(family == AF_INET || family == AF_INET6 ? "an " : "a ") + family_name(family);
    if ((family == AF_INET || family == AF_INET6) && type == SOCK_STREAM && protocol != IPPROTO_TCP) text += " non-TCP";
    text += " " + kind + " socket";
    if (type == SOCK_STREAM || type == SOCK_SEQPACKET)
        text += listening ? " that is listening" : " that is not listening";
    return text;
}

}  // namespace

io::FileDescriptor adopt_socket(io::FileDescriptor fd, const ExpectedSocket& want, bool nonblocking, const char* what) {
    const std::string where = std::string(what) + ": descriptor " + std::to_string(fd.get());
    int family = 0, type = 0, protocol = 0, listening = 0;
    socklen_t len = sizeof type;
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_TYPE, &type, &len) != 0) {
        const int err = errno;
        if (err == EBADF) fd.release();  // nothing to close: it was not open
        throw std::system_error(err, std::system_category(),
                                where + ": expected " + want.expected +
                                    (err == ENOTSOCK ? ", found a descriptor that is not a socket" : ""));
    }
    family = get_int_option(fd.get(), SOL_SOCKET, SO_DOMAIN, where.c_str());
    protocol = get_int_option(fd.get(), SOL_SOCKET, SO_PROTOCOL, where.c_str());
    listening = get_int_option(fd.get(), SOL_SOCKET, SO_ACCEPTCONN, where.c_str());
    const bool family_ok = want.either_ip ? family == AF_INET || family == AF_INET6 : family == want.family;
    const bool ok = family_ok && type == want.type && (want.protocol == 0 || protocol == want.protocol) &&
                    (listening != 0) == want.listening;
    if (!ok)
        throw std::system_error(EINVAL, std::system_category(),
                                where + ": expected " + want.expected + ", found " +
                                    describe_socket(family, type, protocol, listening != 0));
    if (::fcntl(fd.get(), F_SETFD, FD_CLOEXEC) != 0) throw_errno((where + ": F_SETFD").c_str());
    const int flags = ::fcntl(fd.get(), F_GETFL);
    if (flags < 0) throw_errno((where + ": F_GETFL").c_str());
    const int wanted = nonblocking ? flags | O_NONBLOCK : flags & ~O_NONBLOCK;
    if (wanted != flags && ::fcntl(fd.get(), F_SETFL, wanted) != 0) throw_errno((where + ": F_SETFL").c_str());
    return fd;
}


io::FileDescriptor new_socket(int family, int type, const char* what) {
    const int fd = ::socket(family, type | SOCK_CLOEXEC, 0);
    if (fd < 0) throw_errno(what);
    return io::FileDescriptor(fd);
}

io::FileDescriptor new_tcp_socket(int family, int type, const char* what) {
    io::FileDescriptor fd = new_socket(family, type, what);
    set_int_option(fd.get(), IPPROTO_TCP, TCP_NODELAY, 1, what);
    return fd;
}

void close_socket(io::FileDescriptor& fd) {
    if (!fd) return;
    // SHUT_RD, not SHUT_RDWR: it wakes pending reads and accepts without sending anything,
    // so close(2) still decides what the peer sees (FIN, or RST with SO_LINGER 0).
    ::shutdown(fd.get(), SHUT_RD);  // ENOTCONN for a socket never connected: nothing to end
    fd.close();
}

void set_int_option(int fd, int level, int name, int value, const char* what) {
    if (::setsockopt(fd, level, name, &value, sizeof value) != 0) throw_errno(what);
}

int get_int_option(int fd, int level, int name, const char* what) {
    int value = 0;
    socklen_t len = sizeof value;
    if (::getsockopt(fd, level, name, &value, &len) != 0) throw_errno(what);
    return value;
}

}  // namespace eddy::detail
