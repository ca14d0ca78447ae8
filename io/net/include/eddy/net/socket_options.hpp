//! eddy/net/socket_options.hpp: the socket options a service sets, as values.
//!
//!     s.set_keepalive(eddy::net::Keepalive{.idle = 60s, .interval = 10s, .count = 5});
//!     s.set_linger(std::chrono::seconds(0));          // close() resets the connection
//!     auto l = eddy::net::TcpListener::bind(addr, {.reuse_port = true});   // one per worker
//!
//! Every setter and getter is one setsockopt/getsockopt: std::system_error with the errno
//! when the kernel refuses (EINVAL for a value out of its range). Buffer sizes are what the
//! kernel reports: Linux doubles the value set (for its bookkeeping) and clamps it to
//! net.core.{r,w}mem_max.
//! @file
#pragma once

#include <chrono>
#include <optional>

namespace eddy::net {

/// TCP keepalive probes: after `idle` without traffic, one probe every `interval`; the
/// connection is dropped (a read fails with ETIMEDOUT) after `count` unanswered probes.
struct Keepalive {
    std::chrono::seconds idle{7200};    ///< silence before the first probe (TCP_KEEPIDLE)
    std::chrono::seconds interval{75};  ///< between probes (TCP_KEEPINTVL)
    int count = 9;                      ///< unanswered probes before the connection is dropped (TCP_KEEPCNT)
    /// Field by field.
    friend bool operator==(const Keepalive&, const Keepalive&) = default;
};

/// How a listener is set up before bind(2).
struct ListenOptions {
    int backlog = 1024;  ///< listen(2)'s queue of connections not yet accepted
    /// SO_REUSEPORT: several listeners (threads or processes) on one address; the kernel
    /// spreads new connections over them.
    bool reuse_port = false;
    /// IPV6_V6ONLY for an IPv6 address: true, IPv6 only; false, IPv4 too (mapped); unset,
    /// the system's default (net.ipv6.bindv6only).
    std::optional<bool> only_v6{};
    /// SO_RCVBUF, inherited by accepted connections (it sizes the TCP window they offer).
    std::optional<int> recv_buffer_size{};
};

/// What UdpSocket::bind sets on the socket before bind(2).
struct UdpOptions {
    /// SO_REUSEADDR: several sockets of this host on one port, e.g. each receiver of a
    /// multicast group (each gets every datagram of the groups it joined).
    bool reuse_address = false;
    /// SO_REUSEPORT: several sockets on one address and port; the kernel spreads unicast
    /// datagrams over them (one receiver per thread or process).
    bool reuse_port = false;
    /// IPV6_V6ONLY for an IPv6 address: true, IPv6 only; false, IPv4 too (mapped); unset,
    /// the system's default (net.ipv6.bindv6only).
    std::optional<bool> only_v6{};
    /// SO_RCVBUF: how many bytes of datagrams wait unread before the kernel drops new ones
    /// (the kernel doubles it, and caps it at net.core.rmem_max).
    std::optional<int> recv_buffer_size{};
    /// SO_SNDBUF (doubled, capped at net.core.wmem_max).
    std::optional<int> send_buffer_size{};
};

}  // namespace eddy::net
