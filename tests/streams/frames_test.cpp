// tests/streams/frames_test.cpp: io::FrameReader and io::FrameWriter (4-byte big-endian length,
// then the payload):
//   - frames of 0, 1, 1,000 and 300,000 bytes through TCP, with a BufWriter under the writer
//     and a BufReader under the reader, then the clean end (false);
//   - the wire format, byte for byte, over a stream in memory that reads 1 byte at a time;
//   - a stream that ends inside a header or inside a payload: io::UnexpectedEof;
//   - a frame above max_frame: io::FrameTooLong on the reader (after the header) and on the
//     writer (nothing written).
#include <doctest/doctest.h>

#include <cstddef>
#include <string>
#include <vector>

#include <eddy/io/buf_reader.hpp>
#include <eddy/io/buf_writer.hpp>
#include <eddy/io/frames.hpp>
#include <eddy/io/stream_errors.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/tasks/task.hpp>

#include "support/memory_stream.hpp"
#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::io::FrameReader;
using eddy::io::FrameWriter;
using eddy::test::MemoryStream;
using eddy::test::run;

TEST_CASE("frames through TCP, buffered on both sides, then the clean end") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
    const std::vector<std::vector<std::byte>> sent{eddy::test::pattern(0), eddy::test::pattern(1, 2),
                                                   eddy::test::pattern(1000, 3), eddy::test::pattern(300000, 4)};
    const auto got = run(rt, [&]() -> Task<std::vector<std::vector<std::byte>>> {
        auto [client, server] = co_await eddy::test::connect_pair(listener);
        eddy::io::BufWriter buffered(client);
        FrameWriter out(buffered);
        for (const auto& f : sent) co_await out.write_frame(f);
        co_await buffered.flush();
        client.shutdown();
        eddy::io::BufReader in(server);
        FrameReader frames(in);
        std::vector<std::vector<std::byte>> frames_read;
        std::vector<std::byte> frame;
        while (co_await frames.read_frame(frame)) frames_read.push_back(frame);
        co_return frames_read;
    }());
    CHECK(got == sent);
}

TEST_CASE("the wire format, read one byte at a time") {
    Runtime rt(RuntimeConfig{.workers = 1});
    MemoryStream s;
    FrameWriter out(s);
    run(rt, out.write_frame(eddy::test::bytes("hi")));
    CHECK(s.output == std::string("\0\0\0\2hi", 6));
    MemoryStream in{.input = s.output + std::string("\0\0\0\0", 4), .chunk = 1};
    FrameReader frames(in);
    std::vector<std::byte> frame;
    CHECK(run(rt, frames.read_frame(frame)));
    CHECK(eddy::test::text(frame) == "hi");
    CHECK(run(rt, frames.read_frame(frame)));
    CHECK(frame.empty());
    CHECK_FALSE(run(rt, frames.read_frame(frame)));
}

TEST_CASE("truncated frames: UnexpectedEof inside a header and inside a payload") {
    Runtime rt(RuntimeConfig{.workers = 1});
    for (const std::string& input : {std::string("\0\0", 2), std::string("\0\0\0\5abc", 7)}) {
        CAPTURE(input.size());
        MemoryStream s{.input = input, .chunk = 1};
        FrameReader frames(s);
        std::vector<std::byte> frame;
        CHECK_THROWS_AS(run(rt, frames.read_frame(frame)), eddy::io::UnexpectedEof);
    }
}

TEST_CASE("frames above max_frame: FrameTooLong on both sides") {
    Runtime rt(RuntimeConfig{.workers = 1});
    MemoryStream s{.input = std::string("\0\0\4\0", 4) + std::string(1024, 'x'), .chunk = 100};
    FrameReader frames(s, 1000);
    std::vector<std::byte> frame;
    CHECK_THROWS_AS(run(rt, frames.read_frame(frame)), eddy::io::FrameTooLong);
    CHECK(s.pos == 4);  // only the header was consumed

    MemoryStream w;
    FrameWriter out(w, 1000);
    CHECK_THROWS_AS(run(rt, out.write_frame(eddy::test::pattern(1001))), eddy::io::FrameTooLong);
    CHECK(w.output.empty());
    CHECK(w.writes == 0);
}
