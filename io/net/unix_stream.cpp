// io/net/unix_stream.cpp: net::UnixStream (eddy/net/unix_stream.hpp).
#include <eddy/net/unix_stream.hpp>

#include "net/socket_util.hpp"

#include <sys/socket.h>

#include <eddy/io/detail/io_awaiter.hpp>

namespace eddy::net {

Task<UnixStream> UnixStream::connect(const UnixAddr& addr, std::stop_token token) {
    io::FileDescriptor fd = eddy::detail::new_socket(AF_UNIX, SOCK_STREAM, "eddy::net::UnixStream::connect");
    UnixAddr target = addr;  // in this frame until the kernel is done with it
    co_await eddy::detail::IoAwaiter({.kind = eddy::detail::IoKind::kConnect,
                                      .fd = fd.get(),
                                      .addr = const_cast<sockaddr*>(target.native()),
                                      .len = target.native_size()},
                                     "eddy::net::UnixStream::connect", std::move(token));
    co_return UnixStream(std::move(fd));
}

std::pair<UnixStream, UnixStream> UnixStream::pair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
        eddy::detail::throw_errno("eddy::net::UnixStream::pair");
    return {UnixStream(io::FileDescriptor(fds[0])), UnixStream(io::FileDescriptor(fds[1]))};
}

void UnixStream::shutdown(Shutdown how) {
    if (::shutdown(io_.fd(), static_cast<int>(how)) != 0) eddy::detail::throw_errno("eddy::net::UnixStream::shutdown");
}

void UnixStream::close() { io_.close(); }

Credentials UnixStream::peer_credentials() const {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(io_.fd(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        eddy::detail::throw_errno("eddy::net::UnixStream::peer_credentials");
    return Credentials{cred.pid, cred.uid, cred.gid};
}

UnixAddr UnixStream::local_address() const {
    return eddy::detail::socket_name<UnixAddr>(io_.fd(), false, "eddy::net::UnixStream::local_address");
}

UnixAddr UnixStream::peer_address() const {
    return eddy::detail::socket_name<UnixAddr>(io_.fd(), true, "eddy::net::UnixStream::peer_address");
}

}  // namespace eddy::net
