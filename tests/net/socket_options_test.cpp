// tests/net/socket_options_test.cpp: the options a service sets, each set and read back
// with the kernel:
//   - TCP_NODELAY on by default: connect()'s stream, a listener's accepted one, a TcpSocket's
//     connection (off when the builder says so); a stream adopted with from_fd keeps its own;
//   - TcpStream: nodelay, keepalive (idle, interval, count; off again), linger (off, 0 s,
//     5 s), send and receive buffer sizes (at least what was asked: Linux doubles it);
//     a keepalive the kernel refuses (count 0) is std::system_error with EINVAL;
//   - TcpListener with SO_REUSEPORT: two listeners on one port, both accept (each gets
//     connections from 64 tries), and without it the second bind is EADDRINUSE;
//   - IPV6_V6ONLY: an IPv6 listener on :: with only_v6 false takes an IPv4 client, with
//     true it refuses it (skipped where IPv6 is unavailable); the listener's receive buffer.
#include <doctest/doctest.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <stop_token>
#include <utility>
#include <vector>
#include <system_error>

#include <eddy/net/socket_options.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/net/tcp_socket.hpp>
#include <eddy/net/tcp_stream.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/time/sleep.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::net::Keepalive;
using eddy::net::SocketAddr;
using eddy::net::TcpListener;
using eddy::net::TcpStream;
using eddy::test::run;
using namespace std::chrono_literals;

namespace {

struct Defaults {
    bool connected = false, accepted = false, from_socket = false, builder_off = false, adopted = true;
};

Task<Defaults> nodelay_defaults(TcpListener& listener) {
    Defaults d;
    auto [client, server] = co_await eddy::test::connect_pair(listener);
    d.connected = client.nodelay();
    d.accepted = server.nodelay();
    TcpStream built =
        co_await eddy::net::TcpSocket::for_address(listener.local_address()).connect(listener.local_address());
    d.from_socket = built.nodelay();
    auto off = eddy::net::TcpSocket::for_address(listener.local_address());
    off.set_nodelay(false);
    TcpStream quiet = co_await std::move(off).connect(listener.local_address());
    d.builder_off = quiet.nodelay();
    // A socket made without eddy, connected, then adopted: Nagle stays on, as it came.
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const auto addr = listener.local_address();
    if (fd >= 0 && ::connect(fd, addr.native(), addr.native_size()) == 0)
        d.adopted = TcpStream::from_fd(eddy::io::FileDescriptor(fd)).nodelay();
    else if (fd >= 0) ::close(fd);
    co_return d;
}

}  // namespace

TEST_CASE("TCP_NODELAY is on for every TCP stream eddy makes, and adopted ones keep theirs") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    const Defaults d = run(rt, nodelay_defaults(listener));
    CHECK(d.connected);
    CHECK(d.accepted);
    CHECK(d.from_socket);
    CHECK_FALSE(d.builder_off);
    CHECK_FALSE(d.adopted);
}

TEST_CASE("TcpStream options read back what was set") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    auto [client, server] = run(rt, eddy::test::connect_pair(listener));

    client.set_nodelay(true);
    CHECK(client.nodelay());
    client.set_nodelay(false);
    CHECK_FALSE(client.nodelay());

    CHECK_FALSE(client.keepalive().has_value());
    const Keepalive k{.idle = 30s, .interval = 5s, .count = 4};
    client.set_keepalive(k);
    CHECK(client.keepalive() == k);
    client.set_keepalive(std::nullopt);
    CHECK_FALSE(client.keepalive().has_value());
    try {
        client.set_keepalive(Keepalive{.idle = 30s, .interval = 5s, .count = 0});
        FAIL("no exception");
    } catch (const std::system_error& e) {
        CHECK(e.code() == std::errc::invalid_argument);
    }

    CHECK_FALSE(client.linger().has_value());
    client.set_linger(0s);
    CHECK(client.linger() == 0s);
    client.set_linger(5s);
    CHECK(client.linger() == 5s);
    client.set_linger(std::nullopt);
    CHECK_FALSE(client.linger().has_value());

    client.set_send_buffer_size(64 * 1024);
    CHECK(client.send_buffer_size() >= 64 * 1024);
    server.set_recv_buffer_size(32 * 1024);
    CHECK(server.recv_buffer_size() >= 32 * 1024);
}

namespace {

/// Accepts on `l` until `stop`; counts its own and all accepts.
Task<int> count_accepts(TcpListener& l, std::stop_token stop, std::atomic<int>& all) {
    int n = 0;
    try {
        for (;;) {
            TcpStream s = co_await l.accept(stop);
            ++n;
            all.fetch_add(1);
        }
    } catch (const eddy::OperationCancelled&) {
    }
    co_return n;
}

}  // namespace

TEST_CASE("SO_REUSEPORT: two listeners on one port both accept; without it, EADDRINUSE") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto first = TcpListener::bind(SocketAddr::loopback_v4(0), {.reuse_port = true});
    const SocketAddr addr = first.local_address();
    auto second = TcpListener::bind(addr, {.reuse_port = true});
    try {
        TcpListener::bind(addr);
        FAIL("no exception");
    } catch (const std::system_error& e) {
        CHECK(e.code() == std::errc::address_in_use);
    }
    const auto [a, b] = run(rt, [&]() -> Task<std::pair<int, int>> {
        std::stop_source stop;
        std::atomic<int> all{0};
        auto one = eddy::spawn(count_accepts(first, stop.get_token(), all));
        auto two = eddy::spawn(count_accepts(second, stop.get_token(), all));
        std::vector<TcpStream> clients;
        // Each new connection's 4-tuple picks a listener: 64 tries reach both (the chance
        // that all land on one is 2^-63).
        for (int i = 0; i < 64; ++i) clients.push_back(co_await TcpStream::connect(addr));
        while (all.load() < 64) co_await eddy::sleep(5ms);  // run() bounds the wait
        stop.request_stop();
        co_return std::pair{co_await one, co_await two};
    }());
    CHECK(a + b == 64);
    CHECK(a > 0);
    CHECK(b > 0);
}

TEST_CASE("IPV6_V6ONLY decides whether an IPv6 listener takes IPv4 clients") {
    if (!eddy::test::ipv6_loopback_available()) {
        MESSAGE("no IPv6 here: skipped");
        return;
    }
    Runtime rt(RuntimeConfig{.workers = 1});
    for (bool only : {false, true}) {
        CAPTURE(only);
        auto l = TcpListener::bind(SocketAddr::any_v6(0), {.only_v6 = only, .recv_buffer_size = 128 * 1024});
        CHECK(eddy::test::get_int_sockopt(l.native_handle(), IPPROTO_IPV6, IPV6_V6ONLY) == (only ? 1 : 0));
        CHECK(eddy::test::get_int_sockopt(l.native_handle(), SOL_SOCKET, SO_RCVBUF) >= 128 * 1024);
        const auto code =
            run(rt, eddy::test::error_of(TcpStream::connect(SocketAddr::loopback_v4(l.local_address().port()))));
        if (only) CHECK(code == std::errc::connection_refused);
        else CHECK(!code);
    }
}
