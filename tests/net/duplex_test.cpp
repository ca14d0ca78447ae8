// tests/net/duplex_test.cpp: one stream, one reader task and one writer task at once, on a
// runtime of two workers: 8 MiB each way through a peer that echoes, over a TcpStream and a
// UnixStream, every byte counted and checked against the pattern sent. The socket buffers are
// made small, so the writer cannot finish before the reader has taken back most of the echo:
// the two really run at the same time, each waiting on the socket's one poll for its own
// direction. Then what two readers (or two writers) at once do: nothing is lost or
// duplicated, but which bytes each gets (or where each one's bytes land) is unspecified.
// (tls::Stream's reader and writer at once: tests/tls/stream_test.cpp.)
#include <doctest/doctest.h>

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include <eddy/net/tcp_listener.hpp>
#include <eddy/net/tcp_stream.hpp>
#include <eddy/net/unix_stream.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/tasks/task.hpp>

#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::net::SocketAddr;
using eddy::net::TcpListener;
using eddy::net::TcpStream;
using eddy::net::UnixStream;
using eddy::test::run;

namespace {

constexpr std::size_t kBig = std::size_t{8} << 20;
constexpr std::size_t kChunk = 64 * 1024;  // per write_all: the writer suspends many times
constexpr int kSmallBuffer = 64 * 1024;    // SO_SNDBUF/SO_RCVBUF (the kernel doubles it)

/// Echoes what `s` reads back to it until end of stream, then shuts its writing side.
template <class S>
Task<void> echo_until_end(S& s) {
    std::array<std::byte, 16 * 1024> buf;
    for (;;) {
        const std::size_t n = co_await s.read(buf);
        if (n == 0) break;
        co_await s.write_all(std::span(buf).first(n));
    }
    s.shutdown(S::Shutdown::kWrite);
}

/// What the reader and the writer of one stream did.
struct Duplex {
    std::size_t written = 0;             // the writer's
    std::vector<std::byte> received;     // the reader's
    std::size_t read_while_writing = 0;  // the reader's: bytes it got before the writer was done
};

template <class S>
Task<void> write_side(S& s, std::span<const std::byte> data, Duplex& d, std::atomic<bool>& writing) {
    for (std::size_t at = 0; at < data.size(); at += kChunk)
        d.written += co_await s.write_all(data.subspan(at, std::min(kChunk, data.size() - at)));
    writing = false;
    s.shutdown(S::Shutdown::kWrite);  // the echo ends, so the reader sees end of stream
}

template <class S>
Task<void> read_side(S& s, Duplex& d, const std::atomic<bool>& writing) {
    std::vector<std::byte> buf(16 * 1024);
    for (;;) {
        const std::size_t n = co_await s.read(buf);
        if (n == 0) co_return;
        d.received.insert(d.received.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
        if (writing) d.read_while_writing += n;
    }
}

/// `ours` read by one task and written by another at once; `peer` echoes.
template <class S>
Task<Duplex> duplex(S& ours, S& peer, std::span<const std::byte> payload) {
    Duplex d;
    std::atomic<bool> writing{true};
    co_await eddy::when_all(read_side(ours, d, writing), write_side(ours, payload, d, writing), echo_until_end(peer));
    co_return d;
}

void check_duplex(const Duplex& d, const std::vector<std::byte>& payload) {
    CHECK(d.written == payload.size());
    CHECK(d.received.size() == payload.size());
    CHECK(d.received == payload);
    // Under 1 MiB fits in the small buffers on the way out and back: the writer could not
    // finish before the reader had taken back most of the echo.
    CHECK(d.read_while_writing >= payload.size() / 2);
}

void small_buffers(int fd) {
    eddy::test::set_int_sockopt(fd, SOL_SOCKET, SO_SNDBUF, kSmallBuffer);
    eddy::test::set_int_sockopt(fd, SOL_SOCKET, SO_RCVBUF, kSmallBuffer);
}

/// A byte's count in `data`, for each of the 256 values: two readers (or writers) at once
/// move the same bytes, in an order nobody chose.
std::array<std::size_t, 256> histogram(std::span<const std::byte> data) {
    std::array<std::size_t, 256> h{};
    for (std::byte b : data) ++h[static_cast<unsigned char>(b)];
    return h;
}

}  // namespace

TEST_CASE("TcpStream: one task reads while another writes, 8 MiB each way through an echo, on two workers") {
    const std::vector<std::byte> payload = eddy::test::pattern(kBig, 11);
    for (const SocketAddr& lo : eddy::test::loopbacks()) {
        CAPTURE(lo.to_string());
        auto listener = TcpListener::bind(lo);
        small_buffers(listener.native_handle());  // inherited by the accepted socket
        Runtime rt(RuntimeConfig{.workers = 2});
        const Duplex d = run(rt, [](TcpListener& l, std::span<const std::byte> p) -> Task<Duplex> {
            eddy::test::Connection c = co_await eddy::test::connect_pair(l);
            small_buffers(c.client.native_handle());
            co_return co_await duplex(c.client, c.server, p);
        }(listener, payload));
        check_duplex(d, payload);
    }
}

TEST_CASE("UnixStream: one task reads while another writes, 8 MiB each way through an echo, on two workers") {
    const std::vector<std::byte> payload = eddy::test::pattern(kBig, 12);
    auto [ours, peer] = UnixStream::pair();
    small_buffers(ours.native_handle());
    small_buffers(peer.native_handle());
    Runtime rt(RuntimeConfig{.workers = 2});
    const Duplex d = run(rt, duplex(ours, peer, payload));
    check_duplex(d, payload);
}

TEST_CASE("two readers at once on one TcpStream: every byte reaches exactly one of them, both see the end") {
    const std::vector<std::byte> payload = eddy::test::pattern(std::size_t{1} << 20, 13);
    auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    Runtime rt(RuntimeConfig{.workers = 2});
    const auto [a, b] = run(
        rt,
        [](TcpListener& l,
           std::span<const std::byte> p) -> Task<std::pair<std::vector<std::byte>, std::vector<std::byte>>> {
            eddy::test::Connection c = co_await eddy::test::connect_pair(l);
            auto drain = [](TcpStream& s) -> Task<std::vector<std::byte>> {
                std::vector<std::byte> got;
                std::array<std::byte, 4096> buf;
                for (std::size_t n; (n = co_await s.read(buf)) != 0;)
                    got.insert(got.end(), buf.begin(), buf.begin() + n);
                co_return got;  // after its own 0: end of stream reaches every reader
            };
            auto send = [](TcpStream& s, std::span<const std::byte> data) -> Task<void> {
                co_await s.write_all(data);
                s.shutdown(TcpStream::Shutdown::kWrite);
            };
            auto [got_a, got_b, sent] = co_await eddy::when_all(drain(c.client), drain(c.client), send(c.server, p));
            (void)sent;
            co_return std::pair{std::move(got_a), std::move(got_b)};
        }(listener, payload));
    CHECK(a.size() + b.size() == payload.size());
    std::vector<std::byte> both = a;
    both.insert(both.end(), b.begin(), b.end());
    CHECK(histogram(both) == histogram(payload));
}

TEST_CASE("two writers at once on one TcpStream: every byte of both arrives once, interleaved anyhow") {
    const std::vector<std::byte> first = eddy::test::pattern(std::size_t{1} << 20, 14);
    const std::vector<std::byte> second = eddy::test::pattern(std::size_t{1} << 20, 15);
    auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    small_buffers(listener.native_handle());
    Runtime rt(RuntimeConfig{.workers = 2});
    struct Got {
        std::size_t sent_first = 0, sent_second = 0;
        std::vector<std::byte> received;
    };
    const Got got =
        run(rt, [](TcpListener& l, std::span<const std::byte> x, std::span<const std::byte> y) -> Task<Got> {
            eddy::test::Connection c = co_await eddy::test::connect_pair(l);
            small_buffers(c.client.native_handle());
            auto send = [](TcpStream& s, std::span<const std::byte> data) -> Task<std::size_t> {
                co_return co_await s.write_all(data);
            };
            auto receive = [](TcpStream& s) -> Task<std::vector<std::byte>> {
                std::vector<std::byte> all;
                std::array<std::byte, 16 * 1024> buf;
                for (std::size_t n; (n = co_await s.read(buf)) != 0;)
                    all.insert(all.end(), buf.begin(), buf.begin() + n);
                co_return all;
            };
            auto both_sent = [&]() -> Task<std::pair<std::size_t, std::size_t>> {
                auto [n1, n2] = co_await eddy::when_all(send(c.client, x), send(c.client, y));
                c.client.shutdown(TcpStream::Shutdown::kWrite);
                co_return std::pair{n1, n2};
            };
            auto [all, sent] = co_await eddy::when_all(receive(c.server), both_sent());
            co_return Got{sent.first, sent.second, std::move(all)};
        }(listener, first, second));
    CHECK(got.sent_first == first.size());
    CHECK(got.sent_second == second.size());
    REQUIRE(got.received.size() == first.size() + second.size());
    std::vector<std::byte> expected = first;
    expected.insert(expected.end(), second.begin(), second.end());
    CHECK(histogram(got.received) == histogram(expected));
}
