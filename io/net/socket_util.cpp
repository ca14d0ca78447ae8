// io/net/socket_util.cpp
#include "net/socket_util.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <system_error>

namespace eddy::detail {


io::FileDescriptor new_socket(int family, int type, const char* what) {
    const int fd = ::socket(family, type | SOCK_CLOEXEC, 0);
    if (fd < 0) throw_errno(what);
    return io::FileDescriptor(fd);
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
