// io/net/udp_recv_msg.cpp: UdpSocket::recv_msg, a datagram with what the kernel says about it
// (control messages: packet info, receive timestamp, TTL or hop limit).
#include <eddy/net/udp_socket.hpp>

#include "net/socket_util.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

#include <cstring>

#include <eddy/io/detail/io_awaiter.hpp>

namespace eddy::net {
namespace {

// Room for every control message recv_msg asks for, at once: IPv6 packet info (the larger of
// the two families'), a timespec and an int, each with its header and padding. A datagram
// whose messages did not fit has MSG_CTRUNC set; what did fit is still read.
constexpr std::size_t kControlSpace =
    CMSG_SPACE(sizeof(in6_pktinfo)) + CMSG_SPACE(sizeof(timespec)) + CMSG_SPACE(sizeof(int)) + 64;

SocketAddr address_v4(in_addr a) {
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_addr = a;
    return SocketAddr::from_native(reinterpret_cast<const sockaddr*>(&sin), sizeof sin);
}

SocketAddr address_v6(const in6_addr& a) {
    sockaddr_in6 sin6{};
    sin6.sin6_family = AF_INET6;
    sin6.sin6_addr = a;
    return SocketAddr::from_native(reinterpret_cast<const sockaddr*>(&sin6), sizeof sin6);
}

template <class T>
T payload(const cmsghdr* c) {
    T v;
    std::memcpy(&v, CMSG_DATA(c), sizeof v);  // CMSG_DATA need not be aligned for T
    return v;
}

void read_control(msghdr& msg, UdpSocket::Message& out) {
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
            const auto info = payload<in_pktinfo>(c);
            out.destination = address_v4(info.ipi_addr);
            out.interface_index = static_cast<unsigned>(info.ipi_ifindex);
        } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
            const auto info = payload<in6_pktinfo>(c);
            out.destination = address_v6(info.ipi6_addr);
            out.interface_index = info.ipi6_ifindex;
        } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
            const auto ts = payload<timespec>(c);
            out.timestamp =
                std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
                    std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
        } else if ((c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL) ||
                   (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_HOPLIMIT)) {
            out.hop_limit = payload<int>(c);
        }
    }
}

}  // namespace

Task<UdpSocket::Message> UdpSocket::recv_msg(std::span<std::byte> buf, std::stop_token token) {
    // All of this lives in the frame until the completion, which the awaiter waits for even
    // when cancelled: the kernel writes the address and control messages into it.
    sockaddr_storage from{};
    alignas(cmsghdr) std::byte control[kControlSpace];
    detail::OneBufferMessage m(buf.data(), buf.size(), &from, sizeof from);
    m.msg.msg_control = control;
    m.msg.msg_controllen = sizeof control;
    Message out;
    out.size = co_await detail::IoAwaiter({.kind = detail::IoKind::kRecvMsg, .fd = fd_.get(), .addr = &m.msg},
                                          "eddy::net::UdpSocket::recv_msg", std::move(token));
    out.from = SocketAddr::from_native(reinterpret_cast<sockaddr*>(&from), m.msg.msg_namelen);
    out.truncated = (m.msg.msg_flags & MSG_TRUNC) != 0;
    read_control(m.msg, out);
    co_return out;
}

}  // namespace eddy::net
