// tests/streams/buf_reader_test.cpp: io::BufReader over a stream in memory that hands out 1 or 3
// bytes per read (every delimiter split across reads), over TCP and over a pipe
// (io::DescriptorStream):
//   - read_line strips "\n" and "\r\n", keeps empty lines, returns a last line without '\n',
//     and says false at end of stream; read_until with another delimiter; lines();
//   - fill_buf/consume, read, read_exact (io::UnexpectedEof when the stream ends first), a
//     read bigger than the buffer going straight to the stream;
//   - the bound: a line of exactly max_line bytes passes, one byte more is io::LineTooLong
//     (its first max_line bytes dropped, the reader goes on after them); a buffer smaller
//     than a line grows for it; capacity 0 is std::invalid_argument;
//   - 20,000 lines of random lengths written in random pieces over TCP, each read once, in
//     order;
//   - a read_line cancelled while it waits (with_timeout) loses none of the bytes it had.
#include <doctest/doctest.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <eddy/io/buf_reader.hpp>
#include <eddy/io/descriptor_stream.hpp>
#include <eddy/io/pipe.hpp>
#include <eddy/io/stream_errors.hpp>
#include <eddy/io/stream_ops.hpp>
#include <eddy/time/with_timeout.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/memory_stream.hpp"
#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::io::BufReader;
using eddy::test::MemoryStream;
using eddy::test::run;

namespace {

Task<std::vector<std::string>> all_lines(BufReader<MemoryStream>& in) {
    std::vector<std::string> out;
    std::string line;
    while (co_await in.read_line(line)) out.push_back(line);
    co_return out;
}

}  // namespace

TEST_CASE("read_line: split delimiters, CRLF, empty lines, a last line without newline") {
    Runtime rt(RuntimeConfig{.workers = 1});
    for (std::size_t chunk : {1, 3, 1000}) {
        CAPTURE(chunk);
        MemoryStream s{.input = "GET / HTTP/1.1\r\nHost: x\r\n\r\nplain\n\nlast", .chunk = chunk};
        BufReader in(s, 4);  // smaller than every line: the buffer grows for them
        const auto lines = run(rt, all_lines(in));
        CHECK(lines == std::vector<std::string>{"GET / HTTP/1.1", "Host: x", "", "plain", "", "last"});
        std::string line = "untouched?";
        CHECK_FALSE(run(rt, in.read_line(line)));  // still at end of stream
    }
}

TEST_CASE("read_until with another delimiter appends, delimiter included; lines() loops") {
    Runtime rt(RuntimeConfig{.workers = 1});
    MemoryStream s{.input = "a;bb;;ccc", .chunk = 2};
    BufReader in(s);
    std::string out = ">";
    CHECK(run(rt, in.read_until(';', out)) == 2);
    CHECK(run(rt, in.read_until(';', out)) == 3);
    CHECK(run(rt, in.read_until(';', out)) == 1);
    CHECK(run(rt, in.read_until(';', out)) == 3);
    CHECK(run(rt, in.read_until(';', out)) == 0);
    CHECK(out == ">a;bb;;ccc");

    MemoryStream t{.input = "one\r\ntwo\nthree", .chunk = 1};
    BufReader in2(t);
    std::vector<std::string> got;
    run(rt, [&]() -> Task<void> {
        auto lines = in2.lines();
        while (auto line = co_await lines.next()) got.push_back(*line);
    }());
    CHECK(got == std::vector<std::string>{"one", "two", "three"});
}

TEST_CASE("fill_buf/consume, read, read_exact and UnexpectedEof, big reads straight through") {
    Runtime rt(RuntimeConfig{.workers = 1});
    MemoryStream s{.input = "0123456789abcdefghij", .chunk = 3};
    BufReader in(s, 8);
    auto first = run(rt, in.fill_buf());
    CHECK(eddy::test::text(first) == "012");
    in.consume(2);
    CHECK(eddy::test::text(in.buffer()) == "2");
    CHECK(eddy::test::text(run(rt, in.fill_buf())) == "2");  // no read while bytes are buffered
    CHECK(s.reads == 1);
    in.consume(1);
    std::array<std::byte, 5> five{};
    run(rt, in.read_exact(five));
    CHECK(eddy::test::text(five) == "34567");
    std::array<std::byte, 16> big{};
    CHECK(run(rt, in.read(big)) == 1);  // what is buffered comes first
    CHECK(eddy::test::text(std::span(big).first(1)) == "8");
    const std::size_t reads = s.reads;  // bigger than the buffer, which is empty: no copy
    CHECK(run(rt, in.read(big)) == 3);
    CHECK(s.reads == reads + 1);
    CHECK(eddy::test::text(std::span(big).first(3)) == "9ab");
    std::array<std::byte, 20> rest{};
    CHECK_THROWS_AS(run(rt, in.read_exact(rest)), eddy::io::UnexpectedEof);
    try {
        MemoryStream e{.input = "xy"};
        BufReader r(e);
        run(rt, r.read_exact(rest));
        FAIL("no exception");
    } catch (const eddy::io::UnexpectedEof& e) {
        CHECK(e.code() == std::errc::no_message_available);  // ENODATA, like TcpStream::read_exact
        CHECK(std::string(e.what()).find("2 of 20") != std::string::npos);
    }
}

TEST_CASE("max_line: exactly the bound passes, one byte more is LineTooLong and the reader goes on") {
    Runtime rt(RuntimeConfig{.workers = 1});
    const std::string ok(9, 'a');  // 9 bytes + '\n' = 10 = max_line
    const std::string too_long(10, 'b');
    MemoryStream s{.input = ok + "\n" + too_long + "\nafter\n", .chunk = 3};
    BufReader in(s, 4, 10);
    std::string line;
    CHECK(run(rt, in.read_line(line)));
    CHECK(line == ok);
    CHECK_THROWS_AS(run(rt, in.read_line(line)), eddy::io::LineTooLong);
    // The first 10 bytes of the long line were dropped: its "\n" is next, then "after".
    CHECK(run(rt, in.read_line(line)));
    CHECK(line.empty());
    CHECK(run(rt, in.read_line(line)));
    CHECK(line == "after");

    CHECK_THROWS_AS(BufReader(s, 0), std::invalid_argument);
    CHECK_THROWS_AS(BufReader(s, 8, 0), std::invalid_argument);
}

TEST_CASE("over TCP: 20,000 lines of random lengths in random pieces, each read once, in order") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
    std::mt19937 rng(7);
    std::vector<std::string> lines;
    std::string all;
    for (int i = 0; i < 20000; ++i) {
        std::string l(rng() % 200, 'x');
        for (char& c : l) c = static_cast<char>('a' + rng() % 26);
        all += l + (i % 3 == 0 ? "\r\n" : "\n");
        lines.push_back(std::move(l));
    }
    const auto got = run(rt, [&]() -> Task<std::vector<std::string>> {
        auto [client, server] = co_await eddy::test::connect_pair(listener);
        auto writer = eddy::spawn([](eddy::net::TcpStream c, std::string data, unsigned seed) -> Task<void> {
            std::mt19937 r(seed);
            for (std::size_t at = 0; at < data.size();) {
                const std::size_t n = std::min<std::size_t>(1 + r() % 3000, data.size() - at);
                co_await c.write_all(std::string_view(data).substr(at, n));
                at += n;
            }
            c.close();  // end of stream for the reader
        }(std::move(client), all, 11));
        BufReader in(server, 256);
        std::vector<std::string> out;
        std::string line;
        while (co_await in.read_line(line)) out.push_back(line);
        co_await writer;
        co_return out;
    }());
    CHECK(got.size() == lines.size());
    CHECK(got == lines);
}

TEST_CASE("over a pipe (DescriptorStream)") {
    Runtime rt(RuntimeConfig{.workers = 2});
    eddy::io::Pipe p = eddy::io::pipe();
    eddy::io::DescriptorStream rd(std::move(p.read_end));
    eddy::io::DescriptorStream wr(std::move(p.write_end));
    const auto got = run(rt, [&]() -> Task<std::vector<std::string>> {
        co_await eddy::io::write_all(wr, eddy::test::bytes("alpha\nbeta\r\ngamma"));
        wr.close();
        BufReader in(rd, 3);
        std::vector<std::string> out;
        std::string line;
        while (co_await in.read_line(line)) out.push_back(line);
        co_return out;
    }());
    CHECK(got == std::vector<std::string>{"alpha", "beta", "gamma"});
}

TEST_CASE("a read_line cancelled while it waits keeps the bytes it had") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
    run(rt, [&]() -> Task<void> {
        auto [client, server] = co_await eddy::test::connect_pair(listener);
        BufReader in(server);
        co_await client.write_all("abc");
        std::string line;
        bool timed_out = false;
        try {
            co_await eddy::with_timeout(in.read_line(line), std::chrono::milliseconds(50));
        } catch (const eddy::TimedOut&) {
            timed_out = true;
        }
        CHECK(timed_out);
        co_await client.write_all("def\nnext\n");
        CHECK(co_await in.read_line(line));
        CHECK(line == "abcdef");
        CHECK(co_await in.read_line(line));
        CHECK(line == "next");
    }());
}
