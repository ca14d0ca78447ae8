//! eddy/net/udp_socket.hpp: net::UdpSocket, a datagram socket (IPv4 or IPv6).
//!
//!     auto sock = eddy::net::UdpSocket::bind(eddy::net::SocketAddr::loopback_v4(0));
//!     co_await sock.send_to(bytes, peer);
//!     auto got = co_await sock.recv_from(buf);   // got.size, got.from, got.truncated
//!     sock.connect(peer);  co_await sock.send(bytes);  co_await sock.recv(buf);
//!
//! A datagram longer than the buffer is cut to it, and `truncated` says so. Errors are
//! std::system_error carrying the errno (on a connected socket, ECONNREFUSED from a send or
//! receive after the peer's port answered with ICMP "port unreachable").
//!
//! **Broadcast, hop limits and multicast.** Each setter and getter is one setsockopt or
//! getsockopt at the level of the socket's family (IP for an IPv4 socket, IPv6 for an IPv6
//! one), so `set_ttl` is IP_TTL or IPV6_UNICAST_HOPS:
//!
//!     sock.set_broadcast(true);                       // else a send to 255.255.255.255 is EACCES
//!     sock.join_multicast(eddy::net::SocketAddr::parse("239.1.2.3:0"));   // port ignored
//!     sock.set_multicast_ttl(4);                      // how far its own multicasts travel
//!
//! A group that is not a multicast address, or of the other family than the socket, is
//! std::invalid_argument naming it; leaving a group not joined is EADDRNOTAVAIL.
//!
//! **What the kernel says about a datagram** (ancillary data): turn on what you want, then
//! receive with recv_msg(), which gives Received's fields and the extra ones:
//!
//!     sock.set_recv_packet_info(true);   // the address it was sent to, the interface it came in on
//!     sock.set_recv_timestamps(true);    // when the kernel received it (SO_TIMESTAMPNS)
//!     sock.set_recv_hop_limit(true);     // the TTL / hop limit it arrived with
//!     auto m = co_await sock.recv_msg(buf);   // m.destination, m.interface_index, m.timestamp, m.hop_limit
//!
//! Each is empty when not turned on (or when the kernel gave none for that datagram).
//! @file
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <stop_token>

#include <eddy/io/file_descriptor.hpp>
#include <eddy/net/socket_addr.hpp>
#include <eddy/net/socket_options.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::net {

/// A UDP socket, IPv4 or IPv6 (see the file comment). Move-only; closes on destruction.
class UdpSocket {
public:
    /// What one receive got.
    struct Received {
        std::size_t size;        ///< bytes stored in the buffer
        SocketAddr from;         ///< the sender
        bool truncated = false;  ///< the datagram was longer than the buffer
    };

    /// std::system_error on failure (EADDRINUSE, ...).
    static UdpSocket bind(const SocketAddr& addr);
    /// With SO_REUSEADDR, SO_REUSEPORT, IPV6_V6ONLY and the buffer sizes of `options`, set
    /// before bind(2); std::system_error naming the option the kernel refused, or bind's.
    static UdpSocket bind(const SocketAddr& addr, const UdpOptions& options);
    /// Adopts an IPv4 or IPv6 UDP socket made elsewhere (systemd's, net::listen_fds()): takes
    /// ownership of `fd`, checks it (std::system_error EBADF, ENOTSOCK, or EINVAL naming what
    /// it is instead; `fd` is closed then) and makes it close-on-exec and blocking, as
    /// bind()'s sockets are.
    static UdpSocket from_fd(io::FileDescriptor fd);

    /// Sends one datagram; returns the bytes sent.
    Task<std::size_t> send_to(std::span<const std::byte> data, SocketAddr to, std::stop_token token = {});
    /// Receives one datagram.
    Task<Received> recv_from(std::span<std::byte> buf, std::stop_token token = {});
    /// Sets the default destination (connect(2)); then only its datagrams are received.
    void connect(const SocketAddr& peer);
    /// One datagram to the connected peer; returns the bytes sent.
    Task<std::size_t> send(std::span<const std::byte> data, std::stop_token token = {});
    /// One datagram from the connected peer (or anyone, if not connected).
    Task<Received> recv(std::span<std::byte> buf, std::stop_token token = {}) {
        return recv_from(buf, std::move(token));
    }

    /// What recv_msg() got: Received's fields and what the kernel said about the datagram.
    struct Message {
        std::size_t size = 0;    ///< bytes stored in the buffer
        SocketAddr from;         ///< the sender
        bool truncated = false;  ///< the datagram was longer than the buffer
        /// The address it was sent to (a unicast, broadcast or multicast address; port 0),
        /// with set_recv_packet_info(true).
        std::optional<SocketAddr> destination;
        /// The interface it came in on (if_nametoindex's numbering), with set_recv_packet_info(true).
        std::optional<unsigned> interface_index;
        /// When the kernel received it (the real-time clock), with set_recv_timestamps(true).
        std::optional<std::chrono::system_clock::time_point> timestamp;
        /// The IPv4 TTL or IPv6 hop limit it arrived with, with set_recv_hop_limit(true).
        std::optional<int> hop_limit;
    };
    /// Receives one datagram with its ancillary data (see the file comment).
    Task<Message> recv_msg(std::span<std::byte> buf, std::stop_token token = {});

    /// SO_BROADCAST: may send to a broadcast address (else such a send fails with EACCES).
    void set_broadcast(bool on);
    bool broadcast() const;  ///< SO_BROADCAST
    /// The TTL (IPv4) or hop limit (IPv6) of unicast datagrams it sends, 1..255.
    void set_ttl(int hops);
    int ttl() const;  ///< IP_TTL or IPV6_UNICAST_HOPS
    /// The TTL or hop limit of multicast datagrams it sends (1 unless set: the local network).
    void set_multicast_ttl(int hops);
    int multicast_ttl() const;  ///< IP_MULTICAST_TTL or IPV6_MULTICAST_HOPS
    /// Whether a copy of each multicast datagram it sends out of a network interface is looped
    /// back to this host's members of the group (on unless set). A datagram sent out of the
    /// loopback interface itself (set_multicast_interface(lo)) is delivered to this host's
    /// members whatever this says: lo is how it leaves.
    void set_multicast_loop(bool on);
    bool multicast_loop() const;  ///< IP_MULTICAST_LOOP or IPV6_MULTICAST_LOOP
    /// The interface its multicast datagrams leave by (0: the routing table's choice).
    void set_multicast_interface(unsigned interface_index);
    /// Joins multicast `group` (its port is ignored) on one interface (0: the kernel's choice).
    /// The socket then receives the groups it joined itself, and no others: join turns off
    /// IP_MULTICAST_ALL (IPV6_MULTICAST_ALL), under which Linux delivers every group that any
    /// socket of the host joined to each socket bound to that port, so that a socket that
    /// left a group would still get its datagrams while another socket stays in it.
    void join_multicast(const SocketAddr& group, unsigned interface_index = 0);
    /// Leaves a group joined with join_multicast (EADDRNOTAVAIL if it was not joined there).
    void leave_multicast(const SocketAddr& group, unsigned interface_index = 0);
    /// IP_PKTINFO or IPV6_RECVPKTINFO: recv_msg() gives the destination and interface.
    void set_recv_packet_info(bool on);
    /// SO_TIMESTAMPNS: recv_msg() gives when the kernel received the datagram.
    void set_recv_timestamps(bool on);
    /// IP_RECVTTL or IPV6_RECVHOPLIMIT: recv_msg() gives the TTL or hop limit it arrived with.
    void set_recv_hop_limit(bool on);

    SocketAddr local_address() const;  ///< the address it is bound to (with the port the kernel chose for port 0)
    /// Closes the socket. A recv_from pending in another task is not woken by this (an
    /// operation in flight keeps the socket alive in the kernel): cancel it through its
    /// stop_token first.
    void close() { fd_.close(); }
    int recv_buffer_size() const;  ///< SO_RCVBUF as the kernel reports it (twice what was set)
    int send_buffer_size() const;  ///< SO_SNDBUF as the kernel reports it
    int native_handle() const noexcept { return fd_.get(); }  ///< the socket's descriptor, still owned by this object

private:
    explicit UdpSocket(io::FileDescriptor fd) noexcept : fd_(std::move(fd)) {}
    io::FileDescriptor fd_;
};

}  // namespace eddy::net
