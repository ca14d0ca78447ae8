// tests/net/tcp_stream_test.cpp: bytes through net::TcpStream over loopback, IPv4 and IPv6:
// read and write both ways, read_exact across several writes (and ENODATA at end of stream),
// write_all of 8 MiB against a slow reader (partial sends, then the reactor waiting for room).
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
using eddy::test::for_each_loopback;
using eddy::test::loopbacks;
using eddy::test::run;
using eddy::test::text;

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

}  // namespace

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

}  // namespace

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

}  // namespace

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
