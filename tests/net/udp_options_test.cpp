// tests/net/udp_options_test.cpp: UdpSocket's broadcast, TTL and multicast options, bind's
// options (reuse, buffer sizes), a group's receivers on one port (one that left gets nothing),
// and recv_msg's ancillary data (packet info, timestamps, hop limit), over loopback.
//
// Multicast delivery needs a route for the group; IPv4 multicast over the loopback interface
// works on Linux once the sender picks that interface. Where the host refuses (a sandbox
// without the route: ENETUNREACH or ENODEV), the delivery case says so and checks only the
// membership calls, which every Linux host accepts on lo.
#include <doctest/doctest.h>

#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <system_error>

#include <eddy/net/socket_addr.hpp>
#include <eddy/net/udp_socket.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/tasks/task.hpp>

#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::net::SocketAddr;
using eddy::net::UdpSocket;
using eddy::test::bytes;
using eddy::test::loopbacks;
using eddy::test::run;
using eddy::test::text;

namespace {

int errno_of(auto&& f) {
    try {
        f();
    } catch (const std::system_error& e) {
        return e.code().value();
    }
    return 0;
}

Task<UdpSocket::Message> send_then_receive(UdpSocket& from, UdpSocket& to, SocketAddr dest, std::string msg) {
    co_await from.send_to(bytes(msg), dest);
    std::array<std::byte, 256> buf;
    UdpSocket::Message m = co_await to.recv_msg(buf);
    CHECK(text(std::span(buf).first(m.size)) == msg);
    co_return m;
}

}  // namespace

TEST_CASE("broadcast, TTL and multicast options read back what was set, per family") {
    for (const SocketAddr& lo : loopbacks()) {
        CAPTURE(lo.to_string());
        auto s = UdpSocket::bind(lo);
        CHECK_FALSE(s.broadcast());
        s.set_broadcast(true);
        CHECK(s.broadcast());
        s.set_ttl(7);
        CHECK(s.ttl() == 7);
        s.set_multicast_ttl(3);
        CHECK(s.multicast_ttl() == 3);
        CHECK(s.multicast_loop());
        s.set_multicast_loop(false);
        CHECK_FALSE(s.multicast_loop());
        // Out of the kernel's range: EINVAL, named.
        CHECK(errno_of([&] { s.set_ttl(300); }) == EINVAL);
        CHECK(s.ttl() == 7);
    }
}

TEST_CASE("a send to the broadcast address needs set_broadcast") {
    auto s = UdpSocket::bind(SocketAddr::any_v4(0));
    auto r = UdpSocket::bind(SocketAddr::any_v4(0));
    const SocketAddr all = SocketAddr::parse("255.255.255.255:" + std::to_string(r.local_address().port()));
    Runtime rt(RuntimeConfig{.workers = 1});
    const std::string msg = "to everyone";
    CHECK(run(rt, eddy::test::error_of(s.send_to(bytes(msg), all))) == std::errc::permission_denied);
    s.set_broadcast(true);
    const std::error_code after = run(rt, eddy::test::error_of(s.send_to(bytes(msg), all)));
    // Allowed now; a host with no broadcast route still says ENETUNREACH, never EACCES.
    CHECK(after != std::errc::permission_denied);
}

TEST_CASE("join_multicast refuses what is not a group of the socket's family, leave needs a join") {
    auto v4 = UdpSocket::bind(SocketAddr::any_v4(0));
    CHECK_THROWS_WITH_AS(v4.join_multicast(SocketAddr::parse("10.1.2.3:0")),
                         doctest::Contains("10.1.2.3:0 is not a multicast address"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(v4.join_multicast(SocketAddr::parse("[ff02::1:3]:0")),
                         doctest::Contains("is IPv6, the socket IPv4"), std::invalid_argument);
    const unsigned lo = ::if_nametoindex("lo");
    REQUIRE(lo != 0);
    const SocketAddr group = SocketAddr::parse("239.1.2.3:0");
    CHECK(errno_of([&] { v4.leave_multicast(group, lo); }) == EADDRNOTAVAIL);
    v4.join_multicast(group, lo);
    CHECK(errno_of([&] { v4.join_multicast(group, lo); }) == EADDRINUSE);  // twice on one interface
    v4.leave_multicast(group, lo);
    CHECK(errno_of([&] { v4.leave_multicast(group, lo); }) == EADDRNOTAVAIL);

    if (eddy::test::ipv6_loopback_available()) {
        auto v6 = UdpSocket::bind(SocketAddr::any_v6(0));
        const SocketAddr group6 = SocketAddr::parse("[ff02::1:3]:0");
        v6.join_multicast(group6, lo);
        v6.set_multicast_interface(lo);
        v6.leave_multicast(group6, lo);
        CHECK(errno_of([&] { v6.leave_multicast(group6, lo); }) == EADDRNOTAVAIL);
    }
}

TEST_CASE("a joined IPv4 group receives a multicast sent over loopback, and recv_msg names the group") {
    const unsigned lo = ::if_nametoindex("lo");
    auto r = UdpSocket::bind(SocketAddr::any_v4(0));
    const SocketAddr group = SocketAddr::parse("239.1.2.4:" + std::to_string(r.local_address().port()));
    r.join_multicast(group, lo);
    r.set_recv_packet_info(true);
    auto s = UdpSocket::bind(SocketAddr::any_v4(0));
    s.set_multicast_interface(lo);
    s.set_multicast_ttl(1);
    Runtime rt(RuntimeConfig{.workers = 2});
    const std::error_code sent = run(rt, eddy::test::error_of(s.send_to(bytes("hello group"), group)));
    if (sent == std::errc::network_unreachable || sent == std::errc::no_such_device) {
        MESSAGE("this host has no multicast route over lo (" << sent.message() << "): delivery not checked");
        return;
    }
    REQUIRE_FALSE(sent);
    std::array<std::byte, 64> buf;
    const UdpSocket::Message m = run(rt, r.recv_msg(buf));
    CHECK(text(std::span(buf).first(m.size)) == "hello group");
    REQUIRE(m.destination.has_value());
    CHECK(m.destination->to_string() == "239.1.2.4:0");
    CHECK(m.interface_index == lo);
}

TEST_CASE("recv_msg: packet info, hop limit and timestamp when turned on, none otherwise") {
    const unsigned lo = ::if_nametoindex("lo");
    for (const SocketAddr& addr : loopbacks()) {
        CAPTURE(addr.to_string());
        auto a = UdpSocket::bind(addr);
        auto b = UdpSocket::bind(addr);
        Runtime rt(RuntimeConfig{.workers = 2});

        const UdpSocket::Message plain = run(rt, send_then_receive(a, b, b.local_address(), "plain"));
        CHECK(plain.size == 5);
        CHECK(plain.from == a.local_address());
        CHECK_FALSE(plain.truncated);
        CHECK_FALSE(plain.destination.has_value());
        CHECK_FALSE(plain.interface_index.has_value());
        CHECK_FALSE(plain.timestamp.has_value());
        CHECK_FALSE(plain.hop_limit.has_value());

        b.set_recv_packet_info(true);
        b.set_recv_hop_limit(true);
        b.set_recv_timestamps(true);
        a.set_ttl(9);
        const auto before = std::chrono::system_clock::now();
        const UdpSocket::Message m = run(rt, send_then_receive(a, b, b.local_address(), "with data"));
        const auto after = std::chrono::system_clock::now();
        CHECK(m.from == a.local_address());
        REQUIRE(m.destination.has_value());
        // The address the datagram was sent to, without a port.
        CHECK(m.destination->to_string() == (addr.is_v6() ? "[::1]:0" : "127.0.0.1:0"));
        CHECK(m.interface_index == lo);
        CHECK(m.hop_limit == 9);
        REQUIRE(m.timestamp.has_value());
        // The kernel's receive time lies between the two clock reads (a wide margin for
        // clock steps).
        CHECK(*m.timestamp >= before - std::chrono::seconds(5));
        CHECK(*m.timestamp <= after + std::chrono::seconds(5));
    }
}

TEST_CASE("UdpSocket::bind's options: two sockets on one port with reuse_address, buffer sizes") {
    auto a = UdpSocket::bind(SocketAddr::any_v4(0),
                             {.reuse_address = true, .recv_buffer_size = 64 * 1024, .send_buffer_size = 32 * 1024});
    const SocketAddr port = SocketAddr::any_v4(a.local_address().port());
    auto b = UdpSocket::bind(port, {.reuse_address = true});
    CHECK(b.local_address() == a.local_address());
    CHECK(errno_of([&] { UdpSocket::bind(port); }) == EADDRINUSE);
    // Linux keeps twice what was asked (its bookkeeping), up to net.core.rmem_max / wmem_max.
    CHECK(a.recv_buffer_size() >= 64 * 1024);
    CHECK(a.send_buffer_size() >= 32 * 1024);
    auto c = UdpSocket::bind(SocketAddr::loopback_v4(0), {.reuse_port = true});
    auto d = UdpSocket::bind(c.local_address(), {.reuse_port = true});
    CHECK(d.local_address() == c.local_address());
}

namespace {

/// A datagram waiting on `s` right now (a non-blocking peek).
bool waiting(const UdpSocket& s) {
    std::byte b;
    return ::recv(s.native_handle(), &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0;
}

Task<std::string> receive(UdpSocket& s) {
    std::array<std::byte, 64> buf;
    const UdpSocket::Received got = co_await s.recv_from(buf);
    co_return text(std::span(buf).first(got.size));
}

}  // namespace

TEST_CASE("two receivers of one group and port both get its datagrams; one that left gets none") {
    const unsigned lo = ::if_nametoindex("lo");
    auto stays = UdpSocket::bind(SocketAddr::any_v4(0), {.reuse_address = true});
    const std::uint16_t port = stays.local_address().port();
    auto leaves = UdpSocket::bind(SocketAddr::any_v4(port), {.reuse_address = true});
    const SocketAddr group = SocketAddr::parse("239.1.2.5:" + std::to_string(port));
    stays.join_multicast(group, lo);
    leaves.join_multicast(group, lo);
    auto s = UdpSocket::bind(SocketAddr::any_v4(0));
    s.set_multicast_interface(lo);
    Runtime rt(RuntimeConfig{.workers = 2});
    const std::error_code sent = run(rt, eddy::test::error_of(s.send_to(bytes("one"), group)));
    if (sent == std::errc::network_unreachable || sent == std::errc::no_such_device) {
        MESSAGE("this host has no multicast route over lo (" << sent.message() << "): delivery not checked");
        return;
    }
    REQUIRE_FALSE(sent);
    CHECK(run(rt, receive(stays)) == "one");
    CHECK(run(rt, receive(leaves)) == "one");

    leaves.leave_multicast(group, lo);
    run(rt, s.send_to(bytes("two"), group));
    run(rt, s.send_to(bytes("three"), group));
    CHECK(run(rt, receive(stays)) == "two");
    CHECK(run(rt, receive(stays)) == "three");
    // Both were delivered to this host's members as they arrived, before `stays` read them:
    // with IP_MULTICAST_ALL on (Linux's default), `leaves` would hold them too.
    CHECK_FALSE(waiting(leaves));
}
