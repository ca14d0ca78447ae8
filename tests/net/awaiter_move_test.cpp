// tests/net/awaiter_move_test.cpp: the socket operations (TcpStream, UnixStream, and the
// BufReader/BufWriter operations over them) move until they are first awaited, and the moved
// operation waits on the socket and fills the buffer it was given. read_vectored keeps its
// msghdr inside the operation: the moved one must use its own copy (its source is freed
// before the await, so ASan reports a use of the old one). Dropped unawaited, a moved
// operation and its source leave the socket as it was.
#include <doctest/doctest.h>

#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include <eddy/io/buf_reader.hpp>
#include <eddy/io/buf_writer.hpp>
#include <eddy/net/socket_addr.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/net/tcp_stream.hpp>
#include <eddy/net/unix_stream.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/task.hpp>

#include "support/net_helpers.hpp"
#include "support/move_ops.hpp"

using eddy::Task;
using eddy::net::TcpListener;
using eddy::net::TcpStream;
using eddy::net::UnixStream;
using eddy::test::bytes;
using eddy::test::kMovable;
using eddy::test::ref;
using eddy::test::relocate;
using eddy::test::run_alone;
using eddy::test::some_buf;
using eddy::test::some_data;
using eddy::test::some_iov;
using eddy::test::text;

namespace {

template <class S>
constexpr bool kStreamOpsMove = kMovable<decltype(ref<S>().read(some_buf()))>&&
    kMovable<decltype(ref<S>().write(some_data()))>&& kMovable<decltype(ref<S>().write_all(some_data()))>&&
        kMovable<decltype(ref<S>().write_all(std::string_view("x")))>&& kMovable<decltype(ref<S>().read_vectored(
            some_iov()))>&& kMovable<decltype(ref<S>().write_vectored(some_iov()))>;
static_assert(kStreamOpsMove<TcpStream>);
static_assert(kStreamOpsMove<UnixStream>);
static_assert(kMovable<decltype(ref<eddy::io::BufReader<TcpStream>>().fill_buf())>);
static_assert(kMovable<decltype(ref<eddy::io::BufReader<TcpStream>>().read_exact(some_buf()))>);
static_assert(kMovable<decltype(ref<eddy::io::BufReader<TcpStream>>().read_line(ref<std::string>()))>);
static_assert(kMovable<decltype(ref<eddy::io::BufWriter<TcpStream>>().write_all(some_data()))>);
static_assert(kMovable<decltype(ref<eddy::io::BufWriter<TcpStream>>().flush())>);
// Moved into place once, never assigned over.
static_assert(!std::is_move_assignable_v<decltype(ref<TcpStream>().read(some_buf()))>);
static_assert(!std::is_move_assignable_v<decltype(ref<TcpStream>().read_vectored(some_iov()))>);

/// Writes `s` once the reader had the chance to wait for it.
template <class S>
Task<void> write_later(S& s, std::string v) {
    co_await eddy::yield_now();
    co_await s.write_all(bytes(v));
}

}  // namespace

TEST_SUITE("net/awaiter_move") {

TEST_CASE("a moved TcpStream read waits for the peer and fills the buffer it was given") {
    TcpListener listener = TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
    const std::string got = run_alone([](TcpListener& server) -> Task<std::string> {
        eddy::test::Connection c = co_await eddy::test::connect_pair(server);
        std::array<std::byte, 16> buf{};
        auto op = relocate([&] { return c.server.read(buf); });
        eddy::spawn(write_later(c.client, "over tcp"));
        const std::size_t n = co_await op;
        co_return text(std::span(buf).first(n));
    }(listener));
    CHECK(got == "over tcp");
}

TEST_CASE("moved TcpStream write, write_all and vectored operations move the bytes") {
    TcpListener listener = TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
    const std::string got = run_alone([](TcpListener& server) -> Task<std::string> {
        eddy::test::Connection c = co_await eddy::test::connect_pair(server);
        auto w = relocate([&] { return c.client.write(bytes("ab")); });
        CHECK(co_await w == 2);
        auto all = relocate([&] { return c.client.write_all(std::string_view("cd")); });
        CHECK(co_await all == 2);
        std::string e = "e", fg = "fg";
        const std::array<iovec, 2> out{iovec{e.data(), e.size()}, iovec{fg.data(), fg.size()}};
        auto wv = relocate([&] { return c.client.write_vectored(out); });
        CHECK(co_await wv == 3);
        c.client.shutdown();
        // Read it back in two pieces through one moved recvmsg per call, until end of stream.
        std::string seen;
        for (;;) {
            std::array<char, 2> head{};
            std::array<char, 5> tail{};
            const std::array<iovec, 2> in{iovec{head.data(), head.size()}, iovec{tail.data(), tail.size()}};
            auto rv = relocate([&] { return c.server.read_vectored(in); });
            const std::size_t n = co_await rv;
            if (n == 0) break;
            seen.append(head.data(), std::min<std::size_t>(n, 2));
            if (n > 2) seen.append(tail.data(), n - 2);
        }
        co_return seen;
    }(listener));
    CHECK(got == "abcdefg");
}

TEST_CASE("a moved UnixStream read and a moved BufReader line over it") {
    auto [a, b] = UnixStream::pair();
    const std::string got = run_alone([](UnixStream& end_a, UnixStream& end_b) -> Task<std::string> {
        std::array<std::byte, 8> buf{};
        auto op = relocate([&] { return end_a.read(buf); });
        eddy::spawn(write_later(end_b, "unix"));
        const std::size_t n = co_await op;
        eddy::io::BufReader reader(end_a);
        eddy::io::BufWriter writer(end_b);
        co_await relocate([&] { return writer.write_all(std::string_view("a line\n")); });
        co_await relocate([&] { return writer.flush(); });
        std::string line;
        CHECK(co_await relocate([&] { return reader.read_line(line); }));
        co_return text(std::span(buf).first(n)) + "|" + line;
    }(a, b));
    CHECK(got == "unix|a line");
}

TEST_CASE("socket operations moved and dropped unawaited leave the socket as it was") {
    auto [a, b] = UnixStream::pair();
    const std::string got = run_alone([](UnixStream& end_a, UnixStream& end_b) -> Task<std::string> {
        std::array<std::byte, 8> buf{};
        (void)relocate([&] { return end_a.read(buf); });
        const std::array<iovec, 1> iov{iovec{buf.data(), buf.size()}};
        (void)relocate([&] { return end_a.read_vectored(iov); });
        (void)relocate([&] { return end_b.write_all(std::string_view("never sent")); });
        // A real wait on the socket now: the read has to queue on its poll state.
        eddy::spawn(write_later(end_b, "later"));
        const std::size_t n = co_await end_a.read(buf);
        co_return text(std::span(buf).first(n));
    }(a, b));
    CHECK(got == "later");
}

}  // TEST_SUITE("net/awaiter_move")
