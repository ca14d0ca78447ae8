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

}  // namespace eddy::net
