// tests/net/tcp_close_test.cpp: how a net::TcpStream or net::TcpListener ends, over loopback,
// IPv4 and IPv6: shutdown(kWrite) and end of stream (the other direction still works), close()
// at once and nothing more on destruction, close() ending a read or an accept pending in another
// task; and TCP_NODELAY. Error paths are in tcp_errors_test.cpp.
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
using eddy::test::bytes;
using eddy::test::Connection;
using eddy::test::connect_pair;
using eddy::test::error_of;
using eddy::test::loopbacks;
using eddy::test::read_to_end;
using eddy::test::run;
using eddy::test::write_some;

namespace {

struct HalfClose {
    std::string server_got;
    std::size_t read_after_eof = 99;
    std::string client_got;
    std::error_code write_after_shutdown;
};

Task<HalfClose> half_close(TcpListener& listener) {
    Connection c = co_await connect_pair(listener);
    HalfClose h;
    co_await c.client.write_all("request");
    c.client.shutdown(TcpStream::Shutdown::kWrite);
    h.server_got = co_await read_to_end(c.server);  // ends with a 0-byte read, not an error
    std::array<std::byte, 8> buf;
    h.read_after_eof = co_await c.server.read(buf);  // end of stream stays end of stream
    // The other direction is still open.
    co_await c.server.write_all("reply");
    c.server.close();
    h.client_got = co_await read_to_end(c.client);
    // Writing after our own shutdown(kWrite) is EPIPE (without SIGPIPE: the test would die).
    h.write_after_shutdown = co_await error_of(write_some(c.client, bytes("late")));
    co_return h;
}

/// What the peer reads after shutdown(kBoth), then what our own read gives.
Task<std::string> shutdown_both(TcpListener& listener) {
    Connection c = co_await connect_pair(listener);
    c.client.shutdown(TcpStream::Shutdown::kBoth);
    std::string got = co_await read_to_end(c.server);
    std::array<std::byte, 8> buf;
    // After kRead (or kBoth) our own reads see end of stream at once.
    const std::size_t n = co_await c.client.read(buf);
    co_return got + "|" + std::to_string(n);
}

}  // namespace

TEST_CASE("shutdown(kWrite): the peer reads 0 (end of stream, not an error); the reverse direction still works") {
    for (const SocketAddr& lo : loopbacks()) {
        CAPTURE(lo.to_string());
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = 2});
        const HalfClose h = run(rt, half_close(listener));
        CHECK(h.server_got == "request");
        CHECK(h.read_after_eof == 0);
        CHECK(h.client_got == "reply");
        CHECK(h.write_after_shutdown == std::errc::broken_pipe);

        // The peer reads nothing but end of stream; our own read gives 0.
        CHECK(run(rt, shutdown_both(listener)) == "|0");
    }
}

namespace {

struct CloseResult {
    int handle_after_close = 0;
    std::string peer_read;
    bool pipe_intact = false;
    std::error_code peer_address_after_close;
    std::error_code shutdown_after_close;
};

Task<CloseResult> close_then_destroy(TcpListener& listener) {
    CloseResult r;
    eddy::io::Pipe probe;
    {
        Connection c = co_await connect_pair(listener);
        c.client.close();
        r.handle_after_close = c.client.native_handle();
        c.client.close();  // a second close is a no-op
        try {
            (void)c.client.peer_address();
        } catch (const std::system_error& e) {
            r.peer_address_after_close = e.code();
        }
        try {
            c.client.shutdown();
        } catch (const std::system_error& e) {
            r.shutdown_after_close = e.code();
        }
        r.peer_read = co_await read_to_end(c.server);
        // New descriptors may take the closed one's number; destroying the stream below
        // must not close them.
        probe = eddy::io::pipe();
    }
    r.pipe_intact = ::fcntl(probe.read_end.get(), F_GETFD) != -1 && ::fcntl(probe.write_end.get(), F_GETFD) != -1;
    co_return r;
}

Task<std::string> destroy_closes(TcpListener& listener) {
    Connection c = co_await connect_pair(listener);
    {
        TcpStream gone = std::move(c.client);
        co_await gone.write_all("last words");
    }  // destroyed without close(): the peer sees the data, then end of stream
    co_return co_await read_to_end(c.server);
}

}  // namespace

TEST_CASE("close() closes at once, and destruction afterwards closes nothing else") {
    for (const SocketAddr& lo : loopbacks()) {
        CAPTURE(lo.to_string());
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = 2});
        const CloseResult r = run(rt, close_then_destroy(listener));
        CHECK(r.handle_after_close == -1);
        CHECK(r.peer_read.empty());
        CHECK(r.pipe_intact);
        CHECK(r.peer_address_after_close == std::errc::bad_file_descriptor);
        CHECK(r.shutdown_after_close == std::errc::bad_file_descriptor);
        CHECK(run(rt, destroy_closes(listener)) == "last words");
    }
}

namespace {

struct PendingClosed {
    std::size_t read_result = 99;  // what the read pending during close() returned
    std::size_t peer_read = 99;    // what the peer read afterwards
    std::error_code accept_error;  // how the accept pending during close() ended
};

/// close() from one task while another task waits in read (or accept) on the same socket.
Task<PendingClosed> close_while_pending(TcpListener& listener, TcpListener& closing_listener) {
    PendingClosed r;
    Connection c = co_await connect_pair(listener);
    auto reader = eddy::spawn([](TcpStream& s) -> Task<std::size_t> {
        std::array<std::byte, 16> buf;
        co_return co_await s.read(buf);
    }(c.server));
    co_await eddy::sleep(std::chrono::milliseconds(20));  // let the read reach the kernel
    c.server.close();
    r.read_result = co_await std::move(reader);
    std::array<std::byte, 16> buf;
    r.peer_read = co_await c.client.read(buf);  // the peer sees end of stream

    auto acceptor = eddy::spawn(error_of(closing_listener.accept()));
    co_await eddy::sleep(std::chrono::milliseconds(20));
    closing_listener.close();
    r.accept_error = co_await std::move(acceptor);
    co_return r;
}

}  // namespace

TEST_CASE("close() ends a read or an accept pending in another task") {
    for (const SocketAddr& lo : loopbacks()) {
        CAPTURE(lo.to_string());
        auto listener = TcpListener::bind(lo);
        auto closing = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = 2});
        const PendingClosed r = run(rt, close_while_pending(listener, closing));
        CHECK(r.read_result == 0);
        CHECK(r.peer_read == 0);
        CHECK(r.accept_error == std::errc::invalid_argument);
    }
}

namespace {

Task<std::array<int, 4>> nodelay(TcpListener& listener) {
    Connection c = co_await connect_pair(listener);
    std::array<int, 4> seen{};
    seen[0] = eddy::test::get_int_sockopt(c.client.native_handle(), IPPROTO_TCP, TCP_NODELAY);
    seen[1] = eddy::test::get_int_sockopt(c.server.native_handle(), IPPROTO_TCP, TCP_NODELAY);
    c.client.set_nodelay(false);
    seen[2] = eddy::test::get_int_sockopt(c.client.native_handle(), IPPROTO_TCP, TCP_NODELAY);
    c.client.set_nodelay(true);
    seen[3] = eddy::test::get_int_sockopt(c.client.native_handle(), IPPROTO_TCP, TCP_NODELAY);
    co_return seen;
}

}  // namespace

TEST_CASE("set_nodelay toggles TCP_NODELAY") {
    for (const SocketAddr& lo : loopbacks()) {
        CAPTURE(lo.to_string());
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = 1});
        const auto seen = run(rt, nodelay(listener));
        CHECK(seen[0] != 0);  // on by default: connect()'s stream
        CHECK(seen[1] != 0);  // and the accepted one (from the listener)
        CHECK(seen[2] == 0);
        CHECK(seen[3] != 0);
    }
}
