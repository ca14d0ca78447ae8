// tests/net/udp_test.cpp: net::UdpSocket over loopback, IPv4 and IPv6: bind on port 0,
// send_to/recv_from with the sender's address, a receive that waits for a later send, empty
// and large datagrams, and truncation.
//
// Truncation, as observed (recvmsg without MSG_TRUNC): a datagram longer than the buffer
// fills the buffer, recv_from reports the buffer's size, and the rest of that datagram is
// discarded; the next recv_from gets the next datagram. Received carries no flag, so the
// caller cannot tell a truncated datagram from one that fit exactly.
#include <doctest/doctest.h>

#include <fcntl.h>

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <eddy/net/socket_addr.hpp>
#include <eddy/net/udp_socket.hpp>
#include <eddy/sync/event.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/yield_now.hpp>
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

struct Datagram {
    std::size_t sent = 0;
    std::size_t size = 0;
    std::string data;
    SocketAddr from;
};

Task<Datagram> send_and_receive(UdpSocket& a, UdpSocket& b, std::string msg) {
    Datagram d;
    d.sent = co_await a.send_to(bytes(msg), b.local_address());
    std::array<std::byte, 1024> buf;
    auto got = co_await b.recv_from(buf);
    d.size = got.size;
    d.data = text(std::span(buf).first(got.size));
    d.from = got.from;
    co_return d;
}

}  // namespace

TEST_CASE("send_to and recv_from: the size, the bytes and the sender's address") {
    for (const SocketAddr& lo : loopbacks()) {
        CAPTURE(lo.to_string());
        auto a = UdpSocket::bind(lo);
        auto b = UdpSocket::bind(lo);
        CHECK(a.local_address().family() == lo.family());
        CHECK(a.local_address().port() != 0);
        CHECK(a.local_address().port() != b.local_address().port());
        CHECK((::fcntl(a.native_handle(), F_GETFD) & FD_CLOEXEC) != 0);
        Runtime rt(RuntimeConfig{.workers = 2});

        const Datagram ping = run(rt, send_and_receive(a, b, "ping"));
        CHECK(ping.sent == 4);
        CHECK(ping.size == 4);
        CHECK(ping.data == "ping");
        CHECK(ping.from == a.local_address());

        const Datagram pong = run(rt, send_and_receive(b, a, "pong!"));
        CHECK(pong.sent == 5);
        CHECK(pong.data == "pong!");
        CHECK(pong.from == b.local_address());

        // An empty datagram is a datagram: it arrives, with size 0 and its sender.
        const Datagram empty = run(rt, send_and_receive(a, b, ""));
        CHECK(empty.sent == 0);
        CHECK(empty.size == 0);
        CHECK(empty.from == a.local_address());
    }
}

namespace {

Task<UdpSocket::Received> receive_into(UdpSocket& s, std::span<std::byte> buf, eddy::Event& started) {
    started.set();
    co_return co_await s.recv_from(buf);
}

/// The receiver waits first; the datagram is sent only once it has started.
Task<std::pair<std::size_t, SocketAddr>> receive_waits(UdpSocket& a, UdpSocket& b, std::span<std::byte> buf,
                                                       std::span<const std::byte> payload) {
    eddy::Event started;
    auto receiver = eddy::spawn(receive_into(b, buf, started));
    co_await started;
    co_await eddy::yield_now();
    co_await a.send_to(payload, b.local_address());
    auto got = co_await std::move(receiver);
    co_return std::pair{got.size, got.from};
}

}  // namespace

TEST_CASE("a waiting recv_from gets a large datagram sent later, whole") {
    for (const SocketAddr& lo : loopbacks()) {
        CAPTURE(lo.to_string());
        auto a = UdpSocket::bind(lo);
        auto b = UdpSocket::bind(lo);
        // Near the largest UDP payload (65,507 bytes over IPv4): one datagram, many pages.
        const std::vector<std::byte> payload = eddy::test::pattern(60000);
        std::vector<std::byte> buf(65536);
        Runtime rt(RuntimeConfig{.workers = 2});
        const auto [size, from] = run(rt, receive_waits(a, b, buf, payload));
        CHECK(size == payload.size());
        CHECK(from == a.local_address());
        CHECK(std::equal(payload.begin(), payload.end(), buf.begin()));
    }
}

namespace {

struct Truncation {
    std::size_t first = 0, second = 0;
    std::string first_data, second_data;
    bool first_truncated = false, second_truncated = true;
};

Task<Truncation> truncate(UdpSocket& a, UdpSocket& b) {
    const std::string longer = "0123456789" + std::string(100, 'L');
    co_await a.send_to(bytes(longer), b.local_address());
    co_await a.send_to(bytes("abc"), b.local_address());
    Truncation t;
    std::array<std::byte, 10> small;
    auto one = co_await b.recv_from(small);
    t.first = one.size;
    t.first_truncated = one.truncated;
    t.first_data = text(std::span(small).first(one.size));
    auto two = co_await b.recv_from(small);
    t.second = two.size;
    t.second_truncated = two.truncated;
    t.second_data = text(std::span(small).first(two.size));
    co_return t;
}

}  // namespace

TEST_CASE("a datagram longer than the buffer is truncated; the rest is dropped, not read next") {
    for (const SocketAddr& lo : loopbacks()) {
        CAPTURE(lo.to_string());
        auto a = UdpSocket::bind(lo);
        auto b = UdpSocket::bind(lo);
        Runtime rt(RuntimeConfig{.workers = 1});
        const Truncation t = run(rt, truncate(a, b));
        CHECK(t.first == 10);  // the buffer's size, not the datagram's 110
        CHECK(t.first_data == "0123456789");
        CHECK(t.first_truncated);  // and recv_from says so
        CHECK_FALSE(t.second_truncated);
        CHECK(t.second == 3);  // the next datagram, not the tail of the first
        CHECK(t.second_data == "abc");
    }
}

namespace {

Task<std::error_code> send_across_families(UdpSocket& v4, SocketAddr v6_target) {
    co_return co_await eddy::test::error_of(v4.send_to(bytes("x"), v6_target));
}

Task<std::error_code> use_closed(UdpSocket& s) {
    s.close();
    std::array<std::byte, 4> buf;
    co_return co_await eddy::test::error_of(s.recv_from(buf));
}

}  // namespace

TEST_CASE("UDP errors: a send to the other family fails; a closed socket gives EBADF") {
    auto v4 = UdpSocket::bind(SocketAddr::loopback_v4(0));
    auto closed = UdpSocket::bind(SocketAddr::loopback_v4(0));
    Runtime rt(RuntimeConfig{.workers = 1});
    // The kernel's choice of errno for an IPv6 address on an IPv4 socket: EAFNOSUPPORT.
    CHECK(run(rt, send_across_families(v4, SocketAddr::loopback_v6(9))) == std::errc::address_family_not_supported);
    CHECK(run(rt, use_closed(closed)) == std::errc::bad_file_descriptor);
    CHECK(closed.native_handle() == -1);
}

TEST_CASE("a connected UDP socket: send and recv without addresses; other senders are filtered out") {
    for (const SocketAddr& lo : loopbacks()) {
        CAPTURE(lo.to_string());
        auto a = UdpSocket::bind(lo);
        auto b = UdpSocket::bind(lo);
        auto stranger = UdpSocket::bind(lo);
        a.connect(b.local_address());
        b.connect(a.local_address());
        Runtime rt(RuntimeConfig{.workers = 1});
        run(rt, [&]() -> Task<void> {
            co_await stranger.send_to(bytes("not for you"), b.local_address());  // dropped: b is connected to a
            CHECK(co_await a.send(bytes("ping")) == 4);
            std::array<std::byte, 16> buf;
            auto got = co_await b.recv(buf);
            CHECK(text(std::span(buf).first(got.size)) == "ping");
            CHECK(got.from == a.local_address());
            co_await b.send(bytes("pong"));
            got = co_await a.recv(buf);
            CHECK(text(std::span(buf).first(got.size)) == "pong");
        }());
    }
}
