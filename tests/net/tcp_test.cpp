// tests/net/tcp_test.cpp: net::TcpListener and net::TcpStream over loopback, IPv4 and IPv6:
// binding to port 0, connect/accept and the addresses each side sees, read, read_exact,
// write, write_all of 8 MiB against a slow reader (partial sends, then the reactor waiting
// for room), shutdown and end of stream, close, TCP_NODELAY, and the echo server
// with several clients. Error paths are in tcp_errors_test.cpp.
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
using eddy::test::echo;
using eddy::test::error_of;
using eddy::test::for_each_loopback;
using eddy::test::loopbacks;
using eddy::test::read_to_end;
using eddy::test::run;
using eddy::test::text;
using eddy::test::write_some;

namespace {

/// The loopback address of `lo`'s family with `port`.
SocketAddr loopback_like(const SocketAddr& lo, std::uint16_t port) {
    return lo.is_v4() ? SocketAddr::loopback_v4(port) : SocketAddr::loopback_v6(port);
}

} // namespace

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
    co_return Addresses{client.local_address(), client.peer_address(), server.local_address(),
                        server.peer_address(), from};
}

/// Plain accept() of a connection that is already in the backlog.
Task<Addresses> connect_then_accept(TcpListener& listener) {
    TcpStream client = co_await TcpStream::connect(listener.local_address());
    TcpStream server = co_await listener.accept();
    co_return Addresses{client.local_address(), client.peer_address(), server.local_address(),
                        server.peer_address(), SocketAddr{}};
}

void check_addresses(const Addresses& a, const SocketAddr& listening) {
    CHECK(a.client_peer == listening);
    CHECK(a.server_local == listening);
    CHECK(a.server_peer == a.client_local);
    CHECK(a.client_local.family() == listening.family());
    CHECK(a.client_local.port() != 0);
    CHECK(a.client_local.port() != listening.port());
}

} // namespace

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

struct Exchange {
    std::size_t empty_write = 99;
    std::size_t written = 0;
    std::size_t first_read = 0;
    std::string received;
    std::string reply;
};

Task<Exchange> ping_pong(TcpListener& listener) {
    Connection c = co_await connect_pair(listener);
    Exchange x;
    const std::string msg = "0123456789";
    x.empty_write = co_await c.client.write({});  // nothing to send: 0, at once
    co_await c.client.write_all(std::string_view{});
    x.written = co_await c.client.write(bytes(msg));
    // A read returns at most the buffer's size, even with more bytes waiting.
    std::array<std::byte, 4> small;
    x.first_read = co_await c.server.read(small);
    std::array<std::byte, 16> rest;
    const std::size_t remaining = msg.size() - x.first_read;
    co_await c.server.read_exact(std::span(rest).first(remaining));
    x.received = text(std::span(small).first(x.first_read)) + text(std::span(rest).first(remaining));
    // And back the other way.
    co_await c.server.write_all("pong");
    std::array<std::byte, 4> back;
    co_await c.client.read_exact(back);
    x.reply = text(back);
    co_return x;
}

} // namespace

TEST_CASE("write and read move bytes both ways; a read stops at the buffer's size") {
    for (const SocketAddr& lo : loopbacks()) {
        CAPTURE(lo.to_string());
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = 2});
        const Exchange x = run(rt, ping_pong(listener));
        CHECK(x.empty_write == 0);
        CHECK(x.written == 10);  // a small write fits in the send buffer: all of it is taken
        CHECK(x.first_read >= 1);
        CHECK(x.first_read <= 4);
        CHECK(x.received == "0123456789");
        CHECK(x.reply == "pong");
    }
}

namespace {

Task<void> trickle(TcpStream& s, std::vector<std::string> pieces, bool close_after) {
    for (const auto& p : pieces) {
        co_await s.write_all(p);
        co_await eddy::yield_now();
    }
    if (close_after) s.shutdown(TcpStream::Shutdown::kWrite);
}

Task<std::string> read_exact_text(TcpStream& s, std::size_t n) {
    std::string out(n, '\0');
    co_await s.read_exact(std::as_writable_bytes(std::span(out)));
    co_return out;
}

struct ReadExactResult {
    std::string gathered;
    std::error_code short_error;
    std::string short_what;
};

Task<ReadExactResult> read_exact_cases(TcpListener& listener) {
    Connection c = co_await connect_pair(listener);
    ReadExactResult r;
    // (Vectors built first: GCC 12 rejects an initializer list held across a co_await.)
    std::vector<std::string> pieces{"ab", "cde", "fgh"};
    auto both = co_await eddy::when_all(trickle(c.client, std::move(pieces), false), read_exact_text(c.server, 8));
    r.gathered = std::get<1>(both);
    // Three bytes, then end of stream: a read_exact of five fails with ENODATA.
    std::vector<std::string> last{"xyz"};
    co_await trickle(c.client, std::move(last), true);
    std::array<std::byte, 5> five;
    try {
        co_await c.server.read_exact(five);
    } catch (const std::system_error& e) {
        r.short_error = e.code();
        r.short_what = e.what();
    }
    co_return r;
}

} // namespace

TEST_CASE("read_exact gathers several writes and reports ENODATA when the stream ends first") {
    for (const SocketAddr& lo : loopbacks()) {
        CAPTURE(lo.to_string());
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = 2});
        const ReadExactResult r = run(rt, read_exact_cases(listener));
        CHECK(r.gathered == "abcdefgh");
        CHECK(r.short_error.value() == ENODATA);
        CHECK(r.short_error.category() == std::system_category());
        CHECK(r.short_what.find("3 of 5") != std::string::npos);
    }
}

namespace {

constexpr std::size_t kBig = std::size_t{8} << 20;  // 8 MiB

struct BigTransfer {
    std::vector<std::byte> received;
    bool writer_done_at_first_read = true;
    std::size_t reads = 0;
};

Task<void> big_writer(TcpStream& s, const std::vector<std::byte>& payload, std::atomic<bool>& done) {
    co_await s.write_all(payload);
    done.store(true);
    s.shutdown(TcpStream::Shutdown::kWrite);
}

/// Reads 16 KiB at a time, yielding after each read, until end of stream.
Task<void> slow_reader(TcpStream& s, BigTransfer& out, const std::atomic<bool>& writer_done) {
    std::vector<std::byte> buf(16 * 1024);
    for (;;) {
        const std::size_t n = co_await s.read(buf);
        if (out.reads++ == 0) out.writer_done_at_first_read = writer_done.load();
        if (n == 0) co_return;
        out.received.insert(out.received.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
        co_await eddy::yield_now();
    }
}

Task<BigTransfer> big_transfer(TcpListener& listener, const std::vector<std::byte>& payload) {
    Connection c = co_await connect_pair(listener);
    // Small kernel buffers (set explicitly, so autotuning cannot grow them): 8 MiB cannot
    // fit in flight, so write_all must take partial sends, then find the buffer full and
    // wait in the reactor for the reader to make room.
    eddy::test::set_int_sockopt(c.client.native_handle(), SOL_SOCKET, SO_SNDBUF, 64 * 1024);
    BigTransfer t;
    t.received.reserve(payload.size());
    std::atomic<bool> writer_done{false};
    co_await eddy::when_all(big_writer(c.client, payload, writer_done), slow_reader(c.server, t, writer_done));
    co_return t;
}

} // namespace

TEST_CASE("write_all of 8 MiB to a slow reader arrives whole and in order") {
    const std::vector<std::byte> payload = eddy::test::pattern(kBig);
    // One worker: the writer must suspend (not block the thread) for the reader to run.
    for_each_loopback([&](const SocketAddr& lo, const std::size_t workers) {
        auto listener = TcpListener::bind(lo);
        // Inherited by accepted sockets; set before the handshake so the window is small.
        eddy::test::set_int_sockopt(listener.native_handle(), SOL_SOCKET, SO_RCVBUF, 64 * 1024);
        Runtime rt(RuntimeConfig{.workers = workers});
        const BigTransfer t = run(rt, big_transfer(listener, payload));
        CHECK_FALSE(t.writer_done_at_first_read);  // the writer had to wait for the reader
        CHECK(t.received.size() == payload.size());
        CHECK(t.received == payload);
        CHECK(t.reads > kBig / (16 * 1024));  // at most 16 KiB per read, then the 0 of the end
    });
}

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

} // namespace

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

} // namespace

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

} // namespace

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
    c.client.set_nodelay(true);
    seen[1] = eddy::test::get_int_sockopt(c.client.native_handle(), IPPROTO_TCP, TCP_NODELAY);
    c.server.set_nodelay(true);
    seen[2] = eddy::test::get_int_sockopt(c.server.native_handle(), IPPROTO_TCP, TCP_NODELAY);
    c.client.set_nodelay(false);
    seen[3] = eddy::test::get_int_sockopt(c.client.native_handle(), IPPROTO_TCP, TCP_NODELAY);
    co_return seen;
}

} // namespace

TEST_CASE("set_nodelay toggles TCP_NODELAY") {
    for (const SocketAddr& lo : loopbacks()) {
        CAPTURE(lo.to_string());
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = 1});
        const auto seen = run(rt, nodelay(listener));
        CHECK(seen[0] == 0);  // off by default
        CHECK(seen[1] != 0);
        CHECK(seen[2] != 0);
        CHECK(seen[3] == 0);
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

} // namespace

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
