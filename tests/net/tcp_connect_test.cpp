// tests/net/tcp_connect_test.cpp: net::TcpListener and net::TcpStream meeting over loopback,
// IPv4 and IPv6: binding to port 0, connect/accept and the addresses each side sees, and the
// issue's echo server with several clients.
//
// Every task runs through test::run(), which fails the test instead of hanging. Objects the
// tasks refer to are declared before the Runtime, so they outlive its shutdown.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <eddy/io/pipe.hpp>
#include <eddy/time/sleep.hpp>
#include <eddy/net/socket_addr.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/net/tcp_stream.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/task.hpp>

#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::net::SocketAddr;
using eddy::net::TcpListener;
using eddy::net::TcpStream;
using eddy::test::echo;
using eddy::test::error_of;
using eddy::test::loopbacks;
using eddy::test::run;

namespace {

/// The loopback address of `lo`'s family with `port`.
SocketAddr loopback_like(const SocketAddr& lo, std::uint16_t port) {
    return lo.is_v4() ? SocketAddr::loopback_v4(port) : SocketAddr::loopback_v6(port);
}

}  // namespace

TEST_CASE("bind on port 0 picks a free port that local_address reports") {
    for (const SocketAddr& lo : loopbacks()) {
        CAPTURE(lo.to_string());
        auto a = TcpListener::bind(lo);
        auto b = TcpListener::bind(lo);
        const SocketAddr addr = a.local_address();
        CHECK(addr.family() == lo.family());
        CHECK(addr.port() != 0);
        CHECK(addr == loopback_like(lo, addr.port()));  // the address bound, with the port picked
        CHECK(b.local_address().port() != addr.port());
        CHECK(a.native_handle() >= 0);
        CHECK((::fcntl(a.native_handle(), F_GETFD) & FD_CLOEXEC) != 0);
        CHECK(eddy::test::get_int_sockopt(a.native_handle(), SOL_SOCKET, SO_ACCEPTCONN) == 1);
    }
}

namespace {

struct Addresses {
    SocketAddr client_local, client_peer, server_local, server_peer, accepted_from;
};

/// An accept spawned before the connect (usually already waiting in the kernel when the
/// handshake completes; either order must work).
Task<Addresses> accept_then_connect(TcpListener& listener) {
    auto pending = eddy::spawn(listener.accept_with_address());
    TcpStream client = co_await TcpStream::connect(listener.local_address());
    auto [server, from] = co_await std::move(pending);
    co_return Addresses{client.local_address(), client.peer_address(), server.local_address(), server.peer_address(),
                        from};
}

/// Plain accept() of a connection that is already in the backlog.
Task<Addresses> connect_then_accept(TcpListener& listener) {
    TcpStream client = co_await TcpStream::connect(listener.local_address());
    TcpStream server = co_await listener.accept();
    co_return Addresses{client.local_address(), client.peer_address(), server.local_address(), server.peer_address(),
                        SocketAddr{}};
}

void check_addresses(const Addresses& a, const SocketAddr& listening) {
    CHECK(a.client_peer == listening);
    CHECK(a.server_local == listening);
    CHECK(a.server_peer == a.client_local);
    CHECK(a.client_local.family() == listening.family());
    CHECK(a.client_local.port() != 0);
    CHECK(a.client_local.port() != listening.port());
}

}  // namespace

TEST_CASE("connect and accept: each end sees the other's address") {
    for (const SocketAddr& lo : loopbacks()) {
        CAPTURE(lo.to_string());
        auto listener = TcpListener::bind(lo);
        const SocketAddr listening = listener.local_address();
        Runtime rt(RuntimeConfig{.workers = 2});

        const Addresses first = run(rt, accept_then_connect(listener));
        check_addresses(first, listening);
        CHECK(first.accepted_from == first.client_local);  // accept_with_address's peer

        const Addresses second = run(rt, connect_then_accept(listener));
        check_addresses(second, listening);
    }
}

namespace {

// The echo server: one echo task per connection, spawned from the accept loop.
Task<void> listen(TcpListener& listener, std::stop_token stop) {
    for (;;) {
        TcpStream socket = co_await listener.accept(stop);
        eddy::spawn(echo(std::move(socket)));  // the handle is dropped: the task runs on
    }
}

/// One client: several request/response rounds, each echoed whole, then end of stream.
Task<bool> echo_client(SocketAddr server, int id) {
    TcpStream s = co_await TcpStream::connect(server);
    s.set_nodelay(true);
    bool ok = true;
    for (int round = 0; round < 3; ++round) {
        const std::string msg = "client " + std::to_string(id) + " round " + std::to_string(round) +
                                std::string(static_cast<std::size_t>(id * 100 + round), 'x');
        co_await s.write_all(msg);
        std::string back(msg.size(), '\0');
        co_await s.read_exact(std::as_writable_bytes(std::span(back)));
        ok = ok && back == msg;
    }
    s.shutdown(TcpStream::Shutdown::kWrite);
    std::array<std::byte, 16> buf;
    ok = ok && co_await s.read(buf) == 0;  // the server saw our end of stream and closed
    co_return ok;
}

Task<std::pair<std::vector<bool>, std::error_code>> echo_session(TcpListener& listener, int clients) {
    std::stop_source stop;
    auto server = eddy::spawn(error_of(listen(listener, stop.get_token())));
    std::vector<Task<bool>> tasks;
    for (int i = 0; i < clients; ++i) tasks.push_back(echo_client(listener.local_address(), i));
    std::vector<bool> results = co_await eddy::when_all(std::move(tasks));
    stop.request_stop();  // the accept loop ends with operation_canceled
    const std::error_code ended = co_await std::move(server);
    co_return std::pair{results, ended};
}

}  // namespace

TEST_CASE("the issue's echo server (accept loop spawning serve) answers several clients at once") {
    for (const SocketAddr& lo : loopbacks()) {
        CAPTURE(lo.to_string());
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = 2});
        const auto [results, ended] = run(rt, echo_session(listener, 8));
        REQUIRE(results.size() == 8);
        for (std::size_t i = 0; i < results.size(); ++i) {
            CAPTURE(i);
            CHECK(results[i]);
        }
        CHECK(ended == std::errc::operation_canceled);
    }
}
