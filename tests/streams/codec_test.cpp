// tests/streams/codec_test.cpp: the codecs (eddy/io/codec.hpp) and the framed streams that run
// them (eddy/io/framed.hpp):
//   - ByteBuffer: consume, compaction before growth, reserve;
//   - LinesCodec: lines split across reads at every byte boundary, "\r\n", the last line
//     without "\n"; an over-long line (the bytes dropped, counted) then the following line;
//   - LengthDelimitedCodec: frames in one read and split into single bytes, the wire format
//     of FrameReader; a length above max_frame (the header consumed, nothing more) on both
//     sides; the stream ending inside a frame (io::UnexpectedEof with the bytes held);
//   - a peer that announces the largest frame and sends ten bytes: the codec and FrameReader
//     hold what arrived (1,000 such peers, their buffers kept, under 16 MiB of RSS), and a
//     frame that comes whole still arrives whole across the steps it grows by;
//   - batching: N feeds and a flush are one write; the high-water mark writes by itself;
//   - backpressure: a reader taking one item at a time from a stream that never runs dry
//     reads no more than it decodes plus one buffer, and the buffer does not grow;
//   - a next() cancelled while it waits (with_timeout over TCP) keeps the bytes it had;
//   - a user's own codec (fixed-size records) through Framed, and its end of stream.
#include <doctest/doctest.h>

#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <eddy/io/codec.hpp>
#include <eddy/io/framed.hpp>
#include <eddy/io/frames.hpp>
#include <eddy/io/stream_errors.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/task.hpp>
#include <eddy/time/with_timeout.hpp>

#include "support/memory_stream.hpp"
#include "support/sanitized.hpp"
#include "support/net_helpers.hpp"

namespace io = eddy::io;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::test::run;

namespace {

/// Every item of `framed` until its clean end.
template <class F>
Task<std::vector<typename F::Item>> drain(F& framed) {
    std::vector<typename F::Item> items;
    while (auto item = co_await framed.next()) items.push_back(std::move(*item));
    co_return items;
}

std::string as_string(const io::ByteBuffer& b) { return std::string(b.view()); }

/// A stream that never runs dry: "x\n" over and over, counting what it handed out.
struct FloodStream {
    std::size_t handed_out = 0, reads = 0;
    Task<std::size_t> read(std::span<std::byte> buf) {
        ++reads;
        co_await eddy::yield_now();
        for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = std::byte((handed_out + i) % 2 == 0 ? 'x' : '\n');
        handed_out += buf.size();
        co_return buf.size();
    }
};

/// A user's record: two 32-bit numbers, 8 bytes big-endian on the wire.
struct Point {
    std::int32_t x = 0, y = 0;
    bool operator==(const Point&) const = default;
};

struct PointCodec {
    using Item = Point;
    std::optional<Point> decode(io::ByteBuffer& in) {
        if (in.size() < 8) return std::nullopt;
        const auto b = in.data();
        const auto word = [&](std::size_t at) {
            std::uint32_t v = 0;
            for (std::size_t i = 0; i < 4; ++i) v = v << 8 | std::to_integer<std::uint32_t>(b[at + i]);
            return static_cast<std::int32_t>(v);
        };
        Point p{word(0), word(4)};
        in.consume(8);
        return p;
    }
    void encode(const Point& p, io::ByteBuffer& out) {
        std::byte w[8];
        for (std::size_t i = 0; i < 4; ++i) {
            w[i] = std::byte(static_cast<std::uint32_t>(p.x) >> (24 - 8 * i));
            w[4 + i] = std::byte(static_cast<std::uint32_t>(p.y) >> (24 - 8 * i));
        }
        out.append(w);
    }
};
static_assert(io::Codec<PointCodec>);
static_assert(io::Codec<io::LinesCodec>);
static_assert(io::Codec<io::LengthDelimitedCodec>);

}  // namespace

TEST_CASE("io::ByteBuffer: consume, compaction before growth, reserve") {
    io::ByteBuffer b(8);
    b.append(std::string_view("abcdef"));
    b.consume(4);
    CHECK(as_string(b) == "ef");
    b.append(std::string_view("ghijkl"));  // fits once "ef" moves to the front
    CHECK(as_string(b) == "efghijkl");
    CHECK(b.capacity() == 8);
    b.append(std::string_view("m"));
    CHECK(as_string(b) == "efghijklm");
    CHECK(b.capacity() == 16);
    b.reserve(100);
    CHECK(b.capacity() >= 100);
    CHECK(as_string(b) == "efghijklm");
    b.consume(1000);
    CHECK(b.empty());
}

TEST_CASE("lines split across reads at every byte boundary, with \\r\\n and a last line without \\n") {
    Runtime rt(RuntimeConfig{.workers = 1});
    const std::string input = "alpha\nbeta\r\n\r\ngamma";
    for (std::size_t chunk = 1; chunk <= input.size(); ++chunk) {
        CAPTURE(chunk);
        eddy::test::MemoryStream s{.input = input, .chunk = chunk};
        io::FramedRead lines(s, io::LinesCodec(16), 4);
        CHECK(run(rt, drain(lines)) == std::vector<std::string>{"alpha", "beta", "", "gamma"});
        CHECK(lines.at_end());
        CHECK(!run(rt, lines.next()));  // the end stays the end
    }
}

TEST_CASE("an over-long line is dropped, counted, and the next line follows") {
    Runtime rt(RuntimeConfig{.workers = 1});
    const std::string input = std::string(20, 'y') + "\nok\n";
    eddy::test::MemoryStream s{.input = input, .chunk = 1};
    io::FramedRead lines(s, io::LinesCodec(8));
    std::string what;
    try {
        run(rt, lines.next());
    } catch (const io::LineTooLong& e) {
        what = e.what();
    }
    CHECK(what.find("dropped 8 bytes") != std::string::npos);
    CHECK(s.pos == 8);  // the stream gave max_length bytes, all dropped
    CHECK(lines.read_buffer().empty());
    CHECK(lines.decoder().discarding());
    CHECK(run(rt, lines.next()) == std::optional<std::string>("ok"));
    CHECK(!lines.decoder().discarding());
    CHECK(!run(rt, lines.next()));

    // All in one buffer: the whole line goes with the error, the next stays.
    io::LinesCodec codec(8);
    io::ByteBuffer b;
    b.append(std::string_view("0123456789\nnext\n"));
    CHECK_THROWS_WITH_AS(codec.decode(b), doctest::Contains("dropped 11 bytes, all of it"), io::LineTooLong);
    CHECK(as_string(b) == "next\n");
    CHECK(codec.decode(b) == std::optional<std::string>("next"));
    // The limit counts the "\n": 7 characters and "\n" pass, 8 do not.
    b.append(std::string_view("1234567\n12345678\n"));
    CHECK(codec.decode(b) == std::optional<std::string>("1234567"));
    CHECK_THROWS_AS(codec.decode(b), io::LineTooLong);
    CHECK(b.empty());
}

TEST_CASE("length-delimited frames in one read and split, the wire format of FrameReader") {
    Runtime rt(RuntimeConfig{.workers = 1});
    const std::vector<std::vector<std::byte>> frames{eddy::test::pattern(0), eddy::test::pattern(1, 2),
                                                     eddy::test::pattern(300, 3), eddy::test::pattern(5000, 4)};
    eddy::test::MemoryStream out;
    io::FramedWrite writer(out, io::LengthDelimitedCodec());
    for (const auto& f : frames) run(rt, writer.feed(f));
    run(rt, writer.flush());
    CHECK(out.writes == 1);
    CHECK(out.output.size() == 4 * 4 + 5301);
    for (const std::size_t chunk : {std::size_t{1}, std::size_t{7}, out.output.size()}) {
        CAPTURE(chunk);
        eddy::test::MemoryStream in{.input = out.output, .chunk = chunk};
        io::FramedRead reader(in, io::LengthDelimitedCodec(), 64);
        CHECK(run(rt, drain(reader)) == frames);
        CHECK(reader.read_buffer().capacity() <= 2 * 5004 + 64);
    }
    eddy::test::MemoryStream in{.input = out.output, .chunk = 3};
    io::FrameReader classic(in);
    std::vector<std::byte> frame;
    for (const auto& f : frames) {
        CHECK(run(rt, classic.read_frame(frame)));
        CHECK(frame == f);
    }
}

TEST_CASE("a length above max_frame: the header consumed, nothing more; nothing encoded") {
    Runtime rt(RuntimeConfig{.workers = 1});
    const std::string input = std::string("\0\0\0\x0b", 4) + "hello world" + std::string("\0\0\0\x02", 4) + "ok";
    eddy::test::MemoryStream s{.input = input, .chunk = 1};
    io::FramedRead reader(s, io::LengthDelimitedCodec(10));
    CHECK_THROWS_WITH_AS(run(rt, reader.next()), doctest::Contains("a frame of 11 bytes (max_frame 10)"),
                         io::FrameTooLong);
    CHECK(s.pos == 4);  // the header, read one byte at a time, and not a byte of the payload
    CHECK(reader.read_buffer().empty());

    // 1-byte and 2-byte headers, in one buffer: the payload stays for the caller.
    io::LengthDelimitedCodec small(3, 1);
    io::ByteBuffer b;
    b.append(std::string_view("\x05hello"));
    CHECK_THROWS_AS(small.decode(b), io::FrameTooLong);
    CHECK(as_string(b) == "hello");
    io::LengthDelimitedCodec two(1000, 2);
    io::ByteBuffer b2;
    two.encode(eddy::test::pattern(300, 5), b2);
    CHECK(b2.view().substr(0, 2) == std::string_view("\x01\x2c", 2));
    CHECK(two.decode(b2) == eddy::test::pattern(300, 5));

    io::ByteBuffer out;
    out.append(std::string_view("kept"));
    CHECK_THROWS_AS(io::LengthDelimitedCodec(10).encode(eddy::test::pattern(11), out), io::FrameTooLong);
    CHECK(as_string(out) == "kept");
    CHECK_THROWS_AS(io::LengthDelimitedCodec(10, 3), std::invalid_argument);
    CHECK_THROWS_AS(io::LinesCodec(0), std::invalid_argument);
}

TEST_CASE("the stream ending inside a frame: io::UnexpectedEof with the bytes held") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::test::MemoryStream s{.input = std::string("\0\0\0\x05", 4) + "ab", .chunk = 1};
    io::FramedRead reader(s, io::LengthDelimitedCodec());
    try {
        run(rt, reader.next());
        FAIL("no error");
    } catch (const io::UnexpectedEof& e) {
        CHECK(e.code().value() == ENODATA);
        CHECK(std::string(e.what()).find("6 bytes held") != std::string::npos);
    }
    CHECK(reader.read_buffer().size() == 6);

    // Between frames, the end is clean.
    eddy::test::MemoryStream clean{.input = std::string("\0\0\0\x01", 4) + "z", .chunk = 2};
    io::FramedRead reader2(clean, io::LengthDelimitedCodec());
    CHECK(run(rt, drain(reader2)).size() == 1);
}

// The bound on the resident set's growth: 16 MiB (the old reserve: 16 GiB). Under a sanitizer
// the resident set measures the sanitizer (ASan fills and shadows each allocation, TSan
// shadows every byte allocated), so there the capacities alone are checked.
namespace {

#ifdef EDDY_TEST_SANITIZED
constexpr std::size_t kResidentBound = SIZE_MAX;
#else
constexpr std::size_t kResidentBound = std::size_t{16} << 20;
#endif

/// The process' resident set, in bytes (/proc/self/statm).
std::size_t resident_bytes() {
    std::ifstream statm("/proc/self/statm");
    std::size_t pages = 0, resident = 0;
    statm >> pages >> resident;
    return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

/// What a hostile peer sends: a header announcing a frame of `announced` bytes, then ten.
std::string announce(std::uint32_t announced) {
    std::string wire{char(announced >> 24), char(announced >> 16), char(announced >> 8), char(announced)};
    return wire + "0123456789";
}

}  // namespace

TEST_CASE("1,000 peers announcing the largest frame and sending ten bytes hold what they sent, not 16 GiB") {
    // Each peer's reader is kept, with the bytes it holds, while the next ones arrive; the
    // bounds stop at the first reader over them: the old reserve of the announced size held
    // 16 MiB per peer (16 GiB in all).
    constexpr std::size_t kPeers = 1000;
    constexpr std::uint32_t kAnnounced = io::kDefaultMaxFrame;
    using Stream = eddy::test::MemoryStream;
    // meson test sets MALLOC_PERTURB_, with which glibc fills (touches) every allocation:
    // measured so, the resident set is the fill's. Off for this test, back at its end.
    ::mallopt(M_PERTURB, 0);
    struct Restore {
        ~Restore() {
            if (const char* p = std::getenv("MALLOC_PERTURB_")) ::mallopt(M_PERTURB, std::atoi(p));
        }
    } restore;
    Runtime rt(RuntimeConfig{.workers = 1});
    std::vector<std::unique_ptr<Stream>> streams;
    const auto peer = [&] {
        return streams.emplace_back(std::make_unique<Stream>(Stream{.input = announce(kAnnounced), .chunk = 64})).get();
    };
    streams.reserve(2 * kPeers);

    // The codec, through FramedRead.
    std::vector<std::unique_ptr<io::FramedRead<Stream, io::LengthDelimitedCodec>>> framed;
    framed.reserve(kPeers);
    std::size_t before = resident_bytes();
    for (std::size_t i = 0; i < kPeers; ++i) {
        auto& f = framed.emplace_back(
            std::make_unique<io::FramedRead<Stream, io::LengthDelimitedCodec>>(*peer(), io::LengthDelimitedCodec()));
        CHECK_THROWS_AS(run(rt, f->next()), io::UnexpectedEof);  // the peer left mid-frame
        REQUIRE(f->read_buffer().size() == 14);
        REQUIRE(f->read_buffer().capacity() <= io::kFramedReadCapacity + io::LengthDelimitedCodec::kReserveAhead);
    }
    std::size_t grown = resident_bytes() - std::min(before, resident_bytes());
    MESSAGE("FramedRead: resident set grown by " << grown / 1024 << " KiB for " << kPeers << " peers");
    CHECK(grown < kResidentBound);

    // FrameReader, each payload kept.
    std::vector<std::vector<std::byte>> frames(kPeers);
    before = resident_bytes();
    for (std::size_t i = 0; i < kPeers; ++i) {
        io::FrameReader reader(*peer());
        CHECK_THROWS_AS(run(rt, reader.read_frame(frames[i])), io::UnexpectedEof);
        REQUIRE(frames[i].capacity() <= 64 * 1024);
    }
    grown = resident_bytes() - std::min(before, resident_bytes());
    MESSAGE("FrameReader: resident set grown by " << grown / 1024 << " KiB for " << kPeers << " peers");
    CHECK(grown < kResidentBound);

    // A frame that does come whole still arrives whole, across the steps it grows by.
    const std::vector<std::byte> big = eddy::test::pattern(3 * io::LengthDelimitedCodec::kReserveAhead + 17, 9);
    eddy::test::MemoryStream wire;
    io::FramedWrite writer(wire, io::LengthDelimitedCodec());
    run(rt, writer.send(big));
    eddy::test::MemoryStream in{.input = wire.output, .chunk = 1000};
    io::FramedRead reader(in, io::LengthDelimitedCodec());
    CHECK(run(rt, reader.next()) == big);
    eddy::test::MemoryStream in2{.input = wire.output, .chunk = 1000};
    io::FrameReader classic(in2);
    std::vector<std::byte> got;
    CHECK(run(rt, classic.read_frame(got)));
    CHECK(got == big);
}

TEST_CASE("batching: N feeds and a flush are one write; the high-water mark writes by itself") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::test::MemoryStream s;
    io::FramedWrite lines(s, io::LinesCodec());
    std::string expected;
    for (int i = 0; i < 100; ++i) {
        run(rt, lines.feed(std::to_string(i)));
        expected += std::to_string(i) + "\n";
    }
    CHECK(s.writes == 0);
    CHECK(lines.write_buffer().size() == expected.size());
    run(rt, lines.flush());
    CHECK(s.writes == 1);
    CHECK(s.output == expected);
    run(rt, lines.flush());  // nothing buffered: no write
    CHECK(s.writes == 1);

    // 10 bytes a line, high-water 64: a write every 7 lines, then the last 2 on flush.
    eddy::test::MemoryStream s2{.write_chunk = 30};  // partial writes: the buffer keeps the rest
    io::FramedWrite marked(s2, io::LinesCodec(), 64);
    for (int i = 0; i < 100; ++i) run(rt, marked.feed(std::string_view("123456789")));
    CHECK(marked.write_buffer().size() == 20);
    run(rt, marked.flush());
    CHECK(s2.output == [] {
        std::string all;
        for (int i = 0; i < 100; ++i) all += "123456789\n";
        return all;
    }());
    CHECK(s2.writes == 14 * 3 + 1);  // 14 batches of 70 bytes in 30-byte writes, then 20

    run(rt, marked.send(std::string_view("now")));
    CHECK(s2.output.substr(s2.output.size() - 4) == "now\n");
    CHECK(marked.write_buffer().empty());
}

TEST_CASE("backpressure: one item at a time from a flood, in a buffer that does not grow") {
    Runtime rt(RuntimeConfig{.workers = 1});
    FloodStream flood;
    io::FramedRead lines(flood, io::LinesCodec(100), 64);
    run(rt, [&]() -> Task<void> {
        for (int i = 0; i < 1000; ++i) {
            auto line = co_await lines.next();
            REQUIRE(line);
            CHECK(*line == "x");
            co_await eddy::yield_now();  // a slow consumer
        }
    }());
    CHECK(lines.read_buffer().capacity() == 64);
    CHECK(flood.handed_out <= 1000 * 2 + 64);  // what was decoded, plus one buffer
    CHECK(flood.reads <= 1000 * 2 / 32 + 2);   // every read filled at least half the buffer
}

TEST_CASE("a next() cancelled while it waits keeps the bytes it had") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
    run(rt, [&]() -> Task<void> {
        auto [client, server] = co_await eddy::test::connect_pair(listener);
        io::Framed framed(server, io::LinesCodec());
        co_await client.write_all("abc");
        bool timed_out = false;
        try {
            co_await eddy::with_timeout(framed.next(), std::chrono::milliseconds(50));
        } catch (const eddy::TimedOut&) {
            timed_out = true;
        }
        CHECK(timed_out);
        CHECK(as_string(framed.read_buffer()) == "abc");
        co_await client.write_all("def\nnext\n");
        CHECK(co_await framed.next() == std::optional<std::string>("abcdef"));
        CHECK(co_await framed.next() == std::optional<std::string>("next"));
        co_await framed.send(std::string_view("reply"));
        std::array<std::byte, 6> got;
        co_await client.read_exact(got);
        CHECK(std::memcmp(got.data(), "reply\n", 6) == 0);
    }());
}

TEST_CASE("a user's codec through Framed, and its end inside a record") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::test::MemoryStream s;
    io::Framed points(s, PointCodec{});
    const std::vector<Point> sent{{1, 2}, {-3, 4}, {INT32_MAX, INT32_MIN}};
    for (const Point& p : sent) run(rt, points.feed(p));
    run(rt, points.flush());
    CHECK(s.writes == 1);
    CHECK(s.output.size() == 24);

    eddy::test::MemoryStream back{.input = s.output + "abc", .chunk = 5};
    io::Framed again(back, PointCodec{});
    for (const Point& p : sent) CHECK(run(rt, again.next()) == std::optional<Point>(p));
    CHECK_THROWS_WITH_AS(run(rt, again.next()), doctest::Contains("3 bytes held"), io::UnexpectedEof);
}
