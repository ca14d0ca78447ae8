// tests/streams/buf_writer_test.cpp: io::BufWriter over a stream in memory and over TCP:
//   - small writes stay buffered (no write reaches the stream) until flush, which writes
//     them in one write; a stream taking 3 bytes per write is flushed in a loop;
//   - data that does not fit pushes the buffer out first, and data bigger than the buffer
//     goes straight through, in order;
//   - a stream that takes nothing: std::system_error with EPIPE, the bytes stay buffered;
//   - write() gives the whole size (BufWriter is an AsyncWriteStream); capacity 0 is
//     std::invalid_argument;
//   - 10,000 small writes over TCP arrive whole and in order after a flush.
#include <doctest/doctest.h>

#include <cerrno>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <system_error>

#include <eddy/io/buf_writer.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/tasks/task.hpp>

#include "support/memory_stream.hpp"
#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::io::BufWriter;
using eddy::test::bytes;
using eddy::test::MemoryStream;
using eddy::test::run;

TEST_CASE("small writes wait for flush, which writes them at once (in a loop when writes are short)") {
    Runtime rt(RuntimeConfig{.workers = 1});
    for (std::size_t write_chunk : {std::size_t{3}, static_cast<std::size_t>(-1)}) {
        CAPTURE(write_chunk);
        MemoryStream s{.write_chunk = write_chunk};
        BufWriter out(s, 64);
        run(rt, [&]() -> Task<void> {
            co_await out.write_all("hello, ");
            co_await out.write_all(bytes("world"));
            CHECK(co_await out.write(bytes("!")) == 1);
        }());
        CHECK(s.writes == 0);
        CHECK(out.buffered() == 13);
        run(rt, out.flush());
        CHECK(s.output == "hello, world!");
        CHECK(out.buffered() == 0);
        CHECK(s.writes == (write_chunk == 3 ? 5 : 1));
    }
}

TEST_CASE("data that does not fit pushes the buffer out; data bigger than the buffer goes straight through") {
    Runtime rt(RuntimeConfig{.workers = 1});
    MemoryStream s;
    BufWriter out(s, 8);
    run(rt, [&]() -> Task<void> {
        co_await out.write_all("abcde");
        co_await out.write_all("fghij");  // does not fit: "abcde" goes, "fghij" is buffered
        CHECK(s.output == "abcde");
        CHECK(out.buffered() == 5);
        co_await out.write_all(std::string(20, 'z'));  // bigger than the buffer
        CHECK(s.output == "abcdefghij" + std::string(20, 'z'));
        CHECK(out.buffered() == 0);
    }());
    CHECK_THROWS_AS(BufWriter(s, 0), std::invalid_argument);
}

TEST_CASE("a stream that takes nothing: EPIPE, and the bytes stay buffered") {
    Runtime rt(RuntimeConfig{.workers = 1});
    MemoryStream s{.write_chunk = 0};
    BufWriter out(s, 16);
    run(rt, out.write_all("kept"));
    try {
        run(rt, out.flush());
        FAIL("no exception");
    } catch (const std::system_error& e) {
        CHECK(e.code() == std::errc::broken_pipe);
    }
    CHECK(out.buffered() == 4);
    s.write_chunk = 100;
    run(rt, out.flush());
    CHECK(s.output == "kept");
}

TEST_CASE("over TCP: 10,000 small writes, one flush, everything arrives in order") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
    std::string expected;
    for (int i = 0; i < 10000; ++i) expected += std::to_string(i) + ",";
    const std::string got = run(rt, [&]() -> Task<std::string> {
        auto [client, server] = co_await eddy::test::connect_pair(listener);
        auto reader = eddy::test::read_to_end(server);
        BufWriter out(client, 4096);
        for (int i = 0; i < 10000; ++i) co_await out.write_all(std::to_string(i) + ",");
        co_await out.flush();
        client.close();
        co_return co_await std::move(reader);
    }());
    CHECK(got == expected);
}
