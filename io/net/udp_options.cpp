// io/net/udp_options.cpp: UdpSocket's broadcast, hop-limit and multicast options. Each is one
// setsockopt or getsockopt, at the level of the socket's own family (SO_DOMAIN), so one name
// covers IPv4's and IPv6's option.
#include <eddy/net/udp_socket.hpp>

#include "net/socket_util.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace eddy::net {
namespace {

bool is_v6_socket(int fd, const char* what) {
    return detail::get_int_option(fd, SOL_SOCKET, SO_DOMAIN, what) == AF_INET6;
}

// The option of the socket's family: `v4` at IPPROTO_IP or `v6` at IPPROTO_IPV6.
void set_family_option(int fd, int v4, int v6, int value, const char* what) {
    if (is_v6_socket(fd, what)) detail::set_int_option(fd, IPPROTO_IPV6, v6, value, what);
    else detail::set_int_option(fd, IPPROTO_IP, v4, value, what);
}

int get_family_option(int fd, int v4, int v6, const char* what) {
    return is_v6_socket(fd, what) ? detail::get_int_option(fd, IPPROTO_IPV6, v6, what)
                                  : detail::get_int_option(fd, IPPROTO_IP, v4, what);
}

bool is_multicast(const SocketAddr& a) {
    if (a.is_v4()) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(a.native());
        return IN_MULTICAST(ntohl(in->sin_addr.s_addr));
    }
    if (a.is_v6()) return IN6_IS_ADDR_MULTICAST(&reinterpret_cast<const sockaddr_in6*>(a.native())->sin6_addr);
    return false;
}

// IP_ADD/DROP_MEMBERSHIP or IPV6_JOIN/LEAVE_GROUP for `group`, checked against the socket.
void membership(int fd, const SocketAddr& group, unsigned interface_index, bool join, const char* what) {
    if (!is_multicast(group))
        throw std::invalid_argument(std::string(what) + ": " + group.to_string() + " is not a multicast address");
    const bool v6 = is_v6_socket(fd, what);
    if (group.is_v6() != v6)
        throw std::invalid_argument(std::string(what) + ": group " + group.to_string() + " is IPv" +
                                    (group.is_v6() ? "6" : "4") + ", the socket IPv" + (v6 ? "6" : "4"));
    int rc = 0;
    if (v6) {
        ipv6_mreq m{};
        m.ipv6mr_multiaddr = reinterpret_cast<const sockaddr_in6*>(group.native())->sin6_addr;
        m.ipv6mr_interface = interface_index;
        rc = ::setsockopt(fd, IPPROTO_IPV6, join ? IPV6_JOIN_GROUP : IPV6_LEAVE_GROUP, &m, sizeof m);
    } else {
        ip_mreqn m{};
        m.imr_multiaddr = reinterpret_cast<const sockaddr_in*>(group.native())->sin_addr;
        m.imr_address.s_addr = htonl(INADDR_ANY);
        m.imr_ifindex = static_cast<int>(interface_index);
        rc = ::setsockopt(fd, IPPROTO_IP, join ? IP_ADD_MEMBERSHIP : IP_DROP_MEMBERSHIP, &m, sizeof m);
    }
    if (rc != 0) detail::throw_errno((std::string(what) + " " + group.to_string()).c_str());
}

}  // namespace

void UdpSocket::set_broadcast(bool on) {
    detail::set_int_option(fd_.get(), SOL_SOCKET, SO_BROADCAST, on ? 1 : 0, "eddy::net::UdpSocket::set_broadcast");
}

bool UdpSocket::broadcast() const {
    return detail::get_int_option(fd_.get(), SOL_SOCKET, SO_BROADCAST, "eddy::net::UdpSocket::broadcast") != 0;
}

void UdpSocket::set_ttl(int hops) {
    set_family_option(fd_.get(), IP_TTL, IPV6_UNICAST_HOPS, hops, "eddy::net::UdpSocket::set_ttl");
}

int UdpSocket::ttl() const {
    return get_family_option(fd_.get(), IP_TTL, IPV6_UNICAST_HOPS, "eddy::net::UdpSocket::ttl");
}

void UdpSocket::set_multicast_ttl(int hops) {
    set_family_option(fd_.get(), IP_MULTICAST_TTL, IPV6_MULTICAST_HOPS, hops,
                      "eddy::net::UdpSocket::set_multicast_ttl");
}

int UdpSocket::multicast_ttl() const {
    return get_family_option(fd_.get(), IP_MULTICAST_TTL, IPV6_MULTICAST_HOPS, "eddy::net::UdpSocket::multicast_ttl");
}

void UdpSocket::set_multicast_loop(bool on) {
    set_family_option(fd_.get(), IP_MULTICAST_LOOP, IPV6_MULTICAST_LOOP, on ? 1 : 0,
                      "eddy::net::UdpSocket::set_multicast_loop");
}

bool UdpSocket::multicast_loop() const {
    return get_family_option(fd_.get(), IP_MULTICAST_LOOP, IPV6_MULTICAST_LOOP,
                             "eddy::net::UdpSocket::multicast_loop") != 0;
}

void UdpSocket::set_multicast_interface(unsigned interface_index) {
    const char* what = "eddy::net::UdpSocket::set_multicast_interface";
    if (is_v6_socket(fd_.get(), what)) {
        detail::set_int_option(fd_.get(), IPPROTO_IPV6, IPV6_MULTICAST_IF, static_cast<int>(interface_index), what);
        return;
    }
    ip_mreqn m{};
    m.imr_address.s_addr = htonl(INADDR_ANY);
    m.imr_ifindex = static_cast<int>(interface_index);
    if (::setsockopt(fd_.get(), IPPROTO_IP, IP_MULTICAST_IF, &m, sizeof m) != 0) detail::throw_errno(what);
}

void UdpSocket::join_multicast(const SocketAddr& group, unsigned interface_index) {
    const char* what = "eddy::net::UdpSocket::join_multicast";
    membership(fd_.get(), group, interface_index, true, what);
    // Only the groups this socket joined (see the header). Linux 4.20 and later know the IPv6
    // option; an older kernel's ENOPROTOOPT leaves IPv6 sockets as they were.
    const int off = 0;
    const bool v6 = group.is_v6();
    if (::setsockopt(fd_.get(), v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_MULTICAST_ALL : IP_MULTICAST_ALL, &off,
                     sizeof off) != 0 &&
        !(v6 && errno == ENOPROTOOPT)) {
        const int err = errno;
        membership(fd_.get(), group, interface_index, false, what);  // not joined after all
        errno = err;
        detail::throw_errno(what);
    }
}

void UdpSocket::leave_multicast(const SocketAddr& group, unsigned interface_index) {
    membership(fd_.get(), group, interface_index, false, "eddy::net::UdpSocket::leave_multicast");
}

void UdpSocket::set_recv_packet_info(bool on) {
    set_family_option(fd_.get(), IP_PKTINFO, IPV6_RECVPKTINFO, on ? 1 : 0,
                      "eddy::net::UdpSocket::set_recv_packet_info");
}

void UdpSocket::set_recv_timestamps(bool on) {
    detail::set_int_option(fd_.get(), SOL_SOCKET, SO_TIMESTAMPNS, on ? 1 : 0,
                           "eddy::net::UdpSocket::set_recv_timestamps");
}

void UdpSocket::set_recv_hop_limit(bool on) {
    set_family_option(fd_.get(), IP_RECVTTL, IPV6_RECVHOPLIMIT, on ? 1 : 0, "eddy::net::UdpSocket::set_recv_hop_limit");
}

}  // namespace eddy::net
