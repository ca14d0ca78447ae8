// io/net/unix_datagram.cpp: net::UnixDatagram (eddy/net/unix_datagram.hpp), on the readiness
// path with one recvmsg/sendmsg per datagram.
#include <eddy/net/unix_datagram.hpp>

#include "net/socket_util.hpp"

#include <sys/socket.h>
#include <sys/uio.h>

namespace eddy::net {

UnixDatagram UnixDatagram::bind(const UnixAddr& addr) {
    io::FileDescriptor fd = eddy::detail::new_socket(AF_UNIX, SOCK_DGRAM, "eddy::net::UnixDatagram::bind");
    if (::bind(fd.get(), addr.native(), addr.native_size()) != 0)
        eddy::detail::throw_errno("eddy::net::UnixDatagram::bind");
    return UnixDatagram(std::move(fd));
}

UnixDatagram UnixDatagram::unbound() {
    return UnixDatagram(eddy::detail::new_socket(AF_UNIX, SOCK_DGRAM, "eddy::net::UnixDatagram::unbound"));
}

std::pair<UnixDatagram, UnixDatagram> UnixDatagram::pair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, fds) != 0)
        eddy::detail::throw_errno("eddy::net::UnixDatagram::pair");
    return {UnixDatagram(io::FileDescriptor(fds[0])), UnixDatagram(io::FileDescriptor(fds[1]))};
}

void UnixDatagram::connect(const UnixAddr& addr) {
    if (::connect(io_.fd(), addr.native(), addr.native_size()) != 0)
        eddy::detail::throw_errno("eddy::net::UnixDatagram::connect");
}

Task<std::size_t> UnixDatagram::send_to(std::span<const std::byte> data, const UnixAddr& to, std::stop_token token) {
    UnixAddr dest = to;  // lives in this frame until the send is done
    eddy::detail::OneBufferMessage m(data.data(), data.size(), dest.native(), dest.native_size());
    co_return co_await eddy::detail::SocketAwaiter(io_, eddy::detail::SocketAwaiter::Op::kSendMsg, &m.msg, 0,
                                                   "eddy::net::UnixDatagram::send_to", std::move(token));
}

Task<std::size_t> UnixDatagram::send(std::span<const std::byte> data, std::stop_token token) {
    co_return co_await eddy::detail::SocketAwaiter(io_, eddy::detail::SocketAwaiter::Op::kSend,
                                                   const_cast<std::byte*>(data.data()), data.size(),
                                                   "eddy::net::UnixDatagram::send", std::move(token));
}

Task<UnixDatagram::Received> UnixDatagram::recv_from(std::span<std::byte> buf, std::stop_token token) {
    sockaddr_storage from{};
    eddy::detail::OneBufferMessage m(buf.data(), buf.size(), &from, sizeof from);
    const std::size_t n =
        co_await eddy::detail::SocketAwaiter(io_, eddy::detail::SocketAwaiter::Op::kRecvMsg, &m.msg, 0,
                                             "eddy::net::UnixDatagram::recv_from", std::move(token));
    const UnixAddr sender = m.msg.msg_namelen >= sizeof(sa_family_t)
                                ? UnixAddr::from_native(reinterpret_cast<sockaddr*>(&from), m.msg.msg_namelen)
                                : UnixAddr();
    co_return Received{n, sender, (m.msg.msg_flags & MSG_TRUNC) != 0};
}

UnixAddr UnixDatagram::local_address() const {
    return eddy::detail::socket_name<UnixAddr>(io_.fd(), false, "eddy::net::UnixDatagram::local_address");
}

}  // namespace eddy::net
