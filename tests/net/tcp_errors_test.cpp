// tests/net/tcp_errors_test.cpp: how socket errors reach the awaiting task: each a
// std::system_error carrying the errno. ECONNREFUSED, ECONNRESET, EPIPE (without SIGPIPE),
// EBADF after close, EAFNOSUPPORT, EADDRINUSE (and SO_REUSEADDR's TIME_WAIT case), and
// EMFILE from every call that makes a descriptor, with RLIMIT_NOFILE lowered for one test.
//
// Why the EPIPE/ECONNRESET expectations are exact (Linux, net/ipv4/tcp_input.c tcp_reset()
// and tcp_sendmsg()): a RST received in ESTABLISHED stores ECONNRESET as the socket's pending
// error, in CLOSE_WAIT (we already read the peer's FIN) it stores EPIPE. The next send or
// recv reports and clears that pending error; every send after it fails with EPIPE because
// the socket is shut down. A send after our own shutdown(SHUT_WR) is EPIPE as well.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <eddy/fs/file.hpp>
#include <eddy/io/pipe.hpp>
#include <eddy/net/socket_addr.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/net/tcp_stream.hpp>
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
using eddy::net::TcpListener;
using eddy::net::TcpStream;
using eddy::net::UdpSocket;
using eddy::test::bytes;
using eddy::test::Connection;
using eddy::test::connect_pair;
using eddy::test::error_of;
using eddy::test::kDeadline;
using eddy::test::loopbacks;
using eddy::test::past;
using eddy::test::read_some;
using eddy::test::run;
using eddy::test::write_some;

namespace {

/// Closes `s` with a RST instead of a FIN.
void reset(TcpStream& s) {
    eddy::test::linger_zero(s.native_handle());
    s.close();
}

/// Writes one byte at a time until a write fails (the peer's RST may take a moment to
/// arrive); the error, or an empty code if the deadline passed first.
Task<std::error_code> write_until_error(TcpStream& s) {
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (!past(deadline)) {
        const std::error_code ec = co_await error_of(write_some(s, bytes("x")));
        if (ec) co_return ec;
        co_await eddy::yield_now();
    }
    co_return std::error_code{};
}

Task<std::error_code> connect_error(SocketAddr addr) { co_return co_await error_of(TcpStream::connect(addr)); }

}  // namespace

TEST_CASE("connect to a port nobody listens on: ECONNREFUSED") {
    for (const SocketAddr& lo : loopbacks()) {
        CAPTURE(lo.to_string());
        SocketAddr closed;
        {
            auto listener = TcpListener::bind(lo);
            closed = listener.local_address();
            listener.close();  // the port was free a moment ago, and nobody listens now
        }
        Runtime rt(RuntimeConfig{.workers = 1});
        const std::error_code ec = run(rt, connect_error(closed));
        CHECK(ec == std::errc::connection_refused);
        CHECK(ec.category() == std::system_category());
    }
}

namespace {

struct ResetSeen {
    std::error_code pending_read;  // a read waiting when the RST came
    std::error_code write_after;   // the next write
};

Task<std::error_code> read_error(TcpStream& s, eddy::Event& started) {
    std::array<std::byte, 64> buf;
    started.set();
    co_return co_await error_of(read_some(s, buf));
}

Task<ResetSeen> reset_while_reading(TcpListener& listener) {
    Connection c = co_await connect_pair(listener);
    co_await c.client.write_all("unread");  // the RST is sent even with data pending
    eddy::Event started;
    auto reader = eddy::spawn(read_error(c.client, started));
    co_await started;
    co_await eddy::yield_now();
    reset(c.server);
    ResetSeen r;
    r.pending_read = co_await std::move(reader);
    // The read took the pending ECONNRESET; the socket is shut down now: EPIPE.
    r.write_after = co_await error_of(write_some(c.client, bytes("too late")));
    co_return r;
}

Task<std::pair<std::error_code, std::error_code>> reset_then_write(TcpListener& listener) {
    Connection c = co_await connect_pair(listener);
    reset(c.server);
    // Nobody read: the first failing write reports the pending ECONNRESET, the next EPIPE.
    const std::error_code first = co_await write_until_error(c.client);
    const std::error_code second = co_await error_of(write_some(c.client, bytes("y")));
    co_return std::pair{first, second};
}

Task<std::pair<std::size_t, std::error_code>> close_then_write(TcpListener& listener) {
    Connection c = co_await connect_pair(listener);
    c.server.close();  // a normal close: FIN
    std::array<std::byte, 8> buf;
    const std::size_t eof = co_await c.client.read(buf);  // now in CLOSE_WAIT
    // The first write succeeds locally; the closed peer answers it with a RST, which in
    // CLOSE_WAIT leaves EPIPE: writing on fails with EPIPE, never ECONNRESET.
    const std::error_code ec = co_await write_until_error(c.client);
    co_return std::pair{eof, ec};
}

}  // namespace

TEST_CASE("a peer's RST: the waiting read throws ECONNRESET, the next write EPIPE, and no SIGPIPE") {
    for (const SocketAddr& lo : loopbacks()) {
        CAPTURE(lo.to_string());
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = 2});

        const ResetSeen r = run(rt, reset_while_reading(listener));
        CHECK(r.pending_read == std::errc::connection_reset);
        CHECK(r.write_after == std::errc::broken_pipe);

        const auto [first, second] = run(rt, reset_then_write(listener));
        CHECK(first == std::errc::connection_reset);
        CHECK(second == std::errc::broken_pipe);
    }
}

TEST_CASE("writing to a peer that closed normally: EPIPE, and no SIGPIPE") {
    for (const SocketAddr& lo : loopbacks()) {
        CAPTURE(lo.to_string());
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = 2});
        const auto [eof, ec] = run(rt, close_then_write(listener));
        CHECK(eof == 0);
        CHECK(ec == std::errc::broken_pipe);
    }
}

namespace {

struct AfterClose {
    std::error_code read, write, write_all, accept;
};

Task<AfterClose> use_after_close(TcpListener& listener) {
    Connection c = co_await connect_pair(listener);
    c.client.close();
    AfterClose r;
    std::array<std::byte, 8> buf;
    r.read = co_await error_of(read_some(c.client, buf));
    r.write = co_await error_of(write_some(c.client, bytes("x")));
    r.write_all = co_await error_of([](TcpStream& s) -> Task<void> { co_await s.write_all("xyz"); }(c.client));
    listener.close();
    r.accept = co_await error_of(listener.accept());
    co_return r;
}

}  // namespace

TEST_CASE("operations on a closed stream or listener: EBADF") {
    auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    Runtime rt(RuntimeConfig{.workers = 1});
    const AfterClose r = run(rt, use_after_close(listener));
    CHECK(r.read == std::errc::bad_file_descriptor);
    CHECK(r.write == std::errc::bad_file_descriptor);
    CHECK(r.write_all == std::errc::bad_file_descriptor);
    CHECK(r.accept == std::errc::bad_file_descriptor);
}

TEST_CASE("an unspecified address: EAFNOSUPPORT from bind and connect") {
    try {
        (void)TcpListener::bind(SocketAddr{});
        FAIL_CHECK("bind of an unspecified address succeeded");
    } catch (const std::system_error& e) {
        CHECK(e.code() == std::errc::address_family_not_supported);
    }
    try {
        (void)UdpSocket::bind(SocketAddr{});
        FAIL_CHECK("bind of an unspecified address succeeded");
    } catch (const std::system_error& e) {
        CHECK(e.code() == std::errc::address_family_not_supported);
    }
    Runtime rt(RuntimeConfig{.workers = 1});
    CHECK(run(rt, connect_error(SocketAddr{})) == std::errc::address_family_not_supported);
}

TEST_CASE("two listeners on one port: EADDRINUSE, SO_REUSEADDR notwithstanding") {
    for (const SocketAddr& lo : loopbacks()) {
        CAPTURE(lo.to_string());
        auto first = TcpListener::bind(lo);
        const SocketAddr taken = first.local_address();
        try {
            (void)TcpListener::bind(taken);
            FAIL_CHECK("a second listener bound a port that is being listened on");
        } catch (const std::system_error& e) {
            CHECK(e.code() == std::errc::address_in_use);
        }
        // UDP has no SO_REUSEADDR here: a second bind is refused too.
        auto udp = UdpSocket::bind(lo);
        try {
            (void)UdpSocket::bind(udp.local_address());
            FAIL_CHECK("a second UDP socket bound a port in use");
        } catch (const std::system_error& e) {
            CHECK(e.code() == std::errc::address_in_use);
        }
    }
}

namespace {

/// A connection whose server end closes first, so that end lingers (FIN_WAIT/TIME_WAIT) on
/// the listener's port after both ends are closed.
Task<void> server_closes_first(TcpListener& listener) {
    Connection c = co_await connect_pair(listener);
    c.server.close();
    std::array<std::byte, 8> buf;
    (void)co_await c.client.read(buf);  // the server's FIN
    c.client.close();
}

}  // namespace

TEST_CASE("SO_REUSEADDR: a new listener binds while an old connection lingers on the port") {
    for (const SocketAddr& lo : loopbacks()) {
        CAPTURE(lo.to_string());
        std::optional<TcpListener> old(TcpListener::bind(lo));
        const SocketAddr port = old->local_address();
        {
            Runtime rt(RuntimeConfig{.workers = 1});
            run(rt, server_closes_first(*old));
        }
        old.reset();
        // The lingering connection blocks a plain bind (no SO_REUSEADDR) ...
        const int plain = ::socket(port.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
        REQUIRE(plain >= 0);
        CHECK(::bind(plain, port.native(), port.native_size()) == -1);
        CHECK(errno == EADDRINUSE);
        ::close(plain);
        // ... but not TcpListener::bind.
        auto again = TcpListener::bind(port);
        CHECK(again.local_address() == port);
    }
}

namespace {

struct OutOfFds {
    std::error_code pipe, connect, tcp_bind, udp_bind, file_open, accept;
    std::string accepted_read;
};

Task<OutOfFds> exhaust(TcpListener& listener) {
    OutOfFds r;
    // A connection waits in the backlog, made while descriptors were still available.
    TcpStream client = co_await TcpStream::connect(listener.local_address());
    // Two descriptors to give back later (there may be no holes to free otherwise).
    auto reserve = eddy::io::pipe();
    {
        // No room above the descriptors open now; the pipes below fill any holes.
        eddy::test::ScopedFdLimit limit(static_cast<rlim_t>(eddy::test::fd_ceiling()));
        std::vector<eddy::io::Pipe> pipes;
        for (int i = 0; i < 1 << 16; ++i) {  // bounded: the limit allows far fewer
            try {
                pipes.push_back(eddy::io::pipe());
            } catch (const std::system_error& e) {
                r.pipe = e.code();
                break;
            }
        }
        // pipe2 needs two descriptors: at most one is left. Take it, so none are.
        const int spare = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        r.connect = co_await error_of(TcpStream::connect(listener.local_address()));
        try {
            (void)TcpListener::bind(SocketAddr::loopback_v4(0));
        } catch (const std::system_error& e) {
            r.tcp_bind = e.code();
        }
        try {
            (void)UdpSocket::bind(SocketAddr::loopback_v4(0));
        } catch (const std::system_error& e) {
            r.udp_bind = e.code();
        }
        r.file_open = co_await error_of(eddy::fs::File::open("/dev/null"));
        r.accept = co_await error_of(listener.accept());
        // Descriptors back: the connection still waiting in the backlog is accepted now.
        if (spare >= 0) ::close(spare);
        reserve.read_end.close();
        reserve.write_end.close();
        TcpStream server = co_await listener.accept();
        co_await client.write_all("still here");
        std::array<std::byte, 10> buf;
        co_await server.read_exact(buf);
        r.accepted_read = eddy::test::text(buf);
    }  // the limit is restored after the pipes are closed
    co_return r;
}

}  // namespace

TEST_CASE("out of descriptors: EMFILE from pipe, connect, bind, open and accept; accept recovers") {
    auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    Runtime rt(RuntimeConfig{.workers = 1});
    rlimit before{};
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &before) == 0);
    const OutOfFds r = run(rt, exhaust(listener));
    CHECK(r.pipe == std::errc::too_many_files_open);
    CHECK(r.connect == std::errc::too_many_files_open);
    CHECK(r.tcp_bind == std::errc::too_many_files_open);
    CHECK(r.udp_bind == std::errc::too_many_files_open);
    CHECK(r.file_open == std::errc::too_many_files_open);
    CHECK(r.accept == std::errc::too_many_files_open);
    CHECK(r.accepted_read == "still here");
    rlimit after{};
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &after) == 0);
    CHECK(after.rlim_cur == before.rlim_cur);  // restored for the tests that follow
    // And descriptors can be made again.
    CHECK_NOTHROW((void)eddy::io::pipe());
}
