// tests/net/unix_datagram_test.cpp: net::UnixDatagram:
//   - bound sockets on a path and an abstract name exchange datagrams, each whole, with the
//     sender's address; an unbound sender is seen as unnamed;
//   - a datagram longer than the buffer: cut to it, `truncated` set; the next one whole;
//   - pair() and connect(): send/recv without addresses;
//   - sending to a path nobody is bound to: ENOENT / ECONNREFUSED;
//   - a waiting recv_from cancelled by its token.
#include <doctest/doctest.h>

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <stop_token>
#include <string>
#include <thread>

#include <eddy/net/unix_datagram.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::net::UnixAddr;
using eddy::net::UnixDatagram;
using eddy::test::bytes;
using eddy::test::run;
using eddy::test::text;

TEST_CASE("datagrams between bound sockets keep their boundaries and senders") {
    Runtime rt(RuntimeConfig{.workers = 2});
    eddy::test::TempDir dir;
    const UnixAddr a_addr = UnixAddr::path(dir.file("a.sock"));
    const UnixAddr b_addr = UnixAddr::abstract("eddy-dgram-" + std::to_string(::getpid()));
    auto a = UnixDatagram::bind(a_addr);
    auto b = UnixDatagram::bind(b_addr);
    auto anon = UnixDatagram::unbound();
    run(rt, [&]() -> Task<void> {
        CHECK(co_await a.send_to(bytes("first"), b_addr) == 5);
        CHECK(co_await a.send_to(bytes("second!"), b_addr) == 7);
        CHECK(co_await anon.send_to(bytes("anon"), b_addr) == 4);
        std::array<std::byte, 64> buf;
        auto r = co_await b.recv_from(buf);
        CHECK(text(std::span(buf).first(r.size)) == "first");
        CHECK(r.from == a_addr);
        CHECK_FALSE(r.truncated);
        r = co_await b.recv_from(buf);
        CHECK(text(std::span(buf).first(r.size)) == "second!");
        r = co_await b.recv_from(buf);
        CHECK(text(std::span(buf).first(r.size)) == "anon");
        CHECK(r.from.is_unnamed());
        co_await b.send_to(bytes("reply"), a_addr);
        r = co_await a.recv_from(buf);
        CHECK(text(std::span(buf).first(r.size)) == "reply");
        CHECK(r.from == b_addr);
    }());
}

TEST_CASE("a datagram longer than the buffer is cut and reported truncated") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto pair = UnixDatagram::pair();  // not a structured binding: clang 14 cannot capture one
    auto& a = pair.first;
    auto& b = pair.second;
    run(rt, [&]() -> Task<void> {
        co_await a.send(bytes("0123456789"));
        co_await a.send(bytes("ok"));
        std::array<std::byte, 4> small;
        auto r = co_await b.recv(small);
        CHECK(r.size == 4);
        CHECK(r.truncated);
        CHECK(text(small) == "0123");
        r = co_await b.recv(small);
        CHECK(r.size == 2);
        CHECK_FALSE(r.truncated);
    }());
}

TEST_CASE("connect() sets the peer; sending to nobody fails with the errno") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::test::TempDir dir;
    const UnixAddr addr = UnixAddr::path(dir.file("srv.sock"));
    auto server = UnixDatagram::bind(addr);
    auto client = UnixDatagram::unbound();
    client.connect(addr);
    run(rt, [&]() -> Task<void> {
        co_await client.send(bytes("via connect"));
        std::array<std::byte, 32> buf;
        auto r = co_await server.recv_from(buf);
        CHECK(text(std::span(buf).first(r.size)) == "via connect");
    }());
    auto lonely = UnixDatagram::unbound();
    try {
        run(rt, lonely.send_to(bytes("x"), UnixAddr::path(dir.file("nobody.sock"))));
        FAIL("no exception");
    } catch (const std::system_error& e) {
        const bool expected =
            e.code() == std::errc::no_such_file_or_directory || e.code() == std::errc::connection_refused;
        CHECK(expected);
    }
    CHECK_THROWS_AS(client.connect(UnixAddr::path(dir.file("nobody.sock"))), std::system_error);
}

TEST_CASE("a waiting recv_from is cancelled by its token") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto pair = UnixDatagram::pair();  // not a structured binding: clang 14 cannot capture one
    auto& b = pair.second;
    std::stop_source stop;
    std::thread canceller([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        stop.request_stop();
    });
    bool cancelled = false;
    run(rt, [&]() -> Task<void> {
        std::array<std::byte, 8> buf;
        try {
            co_await b.recv_from(buf, stop.get_token());
        } catch (const eddy::OperationCancelled&) {
            cancelled = true;
        }
    }());
    canceller.join();
    CHECK(cancelled);
}
