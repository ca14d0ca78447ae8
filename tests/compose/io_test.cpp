// tests/compose/io_test.cpp: the descriptor operations (io::read and io::write on a pipe,
// io::readable and io::writable) and the buffered streams (BufReader::read_line and fill_buf,
// BufWriter::flush) under every combinator (tests/compose/compose.hpp). Pipes are one page,
// so a write's blocking form waits on a full pipe that the test fills without blocking.
#include <doctest/doctest.h>

#include <poll.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <span>
#include <string>

#include <eddy/eddy.hpp>

#include "compose/compose.hpp"

using eddy::Task;
using eddy::io::BufReader;
using eddy::io::BufWriter;
using eddy::io::DescriptorStream;
using eddy::test::bytes;
using eddy::test::text;
using namespace eddy::test::compose;  // check_all and the pipe helpers
using namespace std::chrono_literals;

namespace {

struct PipeRead {
    eddy::io::Pipe p = eddy::io::pipe();
    std::array<std::byte, 64> buf{};
    Task<void> arm() { co_await eddy::io::write(p.write_end.get(), bytes("abc")); }
    auto completing() { return eddy::io::read(p.read_end.get(), buf); }
    void check(std::size_t n) { COMPOSE_CHECK(text(std::span(buf).first(n)) == "abc"); }
    auto blocking() { return eddy::io::read(p.read_end.get(), buf); }
    Task<void> recheck() {
        co_await eddy::io::write(p.write_end.get(), bytes("late"));
        const std::size_t n = co_await eddy::io::read(p.read_end.get(), buf);
        COMPOSE_CHECK(text(std::span(buf).first(n)) == "late");
    }
};
TEST_CASE("io: io::read on a pipe") { check_all<PipeRead>(); }

struct PipeWrite {
    eddy::io::Pipe p = eddy::io::pipe();
    PipeWrite() { shrink_pipe(p.write_end.get()); }
    Task<void> arm() {
        drain_pipe(p.read_end.get());
        co_return;
    }
    auto completing() { return eddy::io::write(p.write_end.get(), bytes("hello")); }
    void check(std::size_t n) { COMPOSE_CHECK((n == 5 && drain_pipe(p.read_end.get()) == "hello")); }
    Task<void> hold() {
        fill_pipe(p.write_end.get());
        co_return;
    }
    auto blocking() { return eddy::io::write(p.write_end.get(), bytes("hello")); }
    Task<void> recheck() {
        // The cancelled write wrote nothing: the pipe holds the fill, then takes "hello".
        COMPOSE_CHECK(pipe_bytes(p.read_end.get()) == pipe_capacity(p.write_end.get()));
        drain_pipe(p.read_end.get());
        const std::size_t n = co_await eddy::io::write(p.write_end.get(), bytes("hello"));
        COMPOSE_CHECK((n == 5 && drain_pipe(p.read_end.get()) == "hello"));
        fill_pipe(p.write_end.get());
    }
};
TEST_CASE("io: io::write on a pipe") { check_all<PipeWrite>(); }

struct Readable {
    eddy::io::Pipe p = eddy::io::pipe();
    Task<void> arm() {
        put(p.write_end.get(), "r");
        co_return;
    }
    auto completing() { return eddy::io::readable(p.read_end.get()); }
    void check(unsigned ev) { COMPOSE_CHECK(((ev & POLLIN) != 0 && drain_pipe(p.read_end.get()) == "r")); }
    auto blocking() { return eddy::io::readable(p.read_end.get()); }
    Task<void> recheck() {
        COMPOSE_CHECK(pipe_bytes(p.read_end.get()) == 0);
        put(p.write_end.get(), "z");
        const unsigned ev = co_await eddy::io::readable(p.read_end.get());
        COMPOSE_CHECK(((ev & POLLIN) != 0 && drain_pipe(p.read_end.get()) == "z"));
    }
};
TEST_CASE("io: io::readable") { check_all<Readable>(); }

struct Writable {
    eddy::io::Pipe p = eddy::io::pipe();
    Writable() { shrink_pipe(p.write_end.get()); }
    Task<void> arm() {
        drain_pipe(p.read_end.get());
        co_return;
    }
    auto completing() { return eddy::io::writable(p.write_end.get()); }
    void check(unsigned ev) { COMPOSE_CHECK((ev & POLLOUT) != 0); }
    Task<void> hold() {
        fill_pipe(p.write_end.get());
        co_return;
    }
    auto blocking() { return eddy::io::writable(p.write_end.get()); }
    Task<void> recheck() {
        drain_pipe(p.read_end.get());
        const unsigned ev = co_await eddy::io::writable(p.write_end.get());
        COMPOSE_CHECK((ev & POLLOUT) != 0);
        fill_pipe(p.write_end.get());
    }
};
TEST_CASE("io: io::writable") { check_all<Writable>(); }

/// A BufReader over a pipe's read end; the test writes at `w`.
struct Reader {
    eddy::io::Pipe p = eddy::io::pipe();
    int w = p.write_end.get();
    DescriptorStream in{std::move(p.read_end)};
    BufReader<DescriptorStream> reader{in};
};

struct ReadLine : Reader {
    std::string line;
    Task<void> arm() {
        put(w, "line\n");
        co_return;
    }
    auto completing() { return reader.read_line(line); }
    void check(bool got) { COMPOSE_CHECK((got && line == "line")); }
    Task<void> hold() {
        put(w, "half");
        co_return;
    }  // the blocking read_line takes it in, then waits
    auto blocking() { return reader.read_line(line); }
    Task<void> recheck() {
        // What the cancelled read_line had read stays buffered: the line comes out whole.
        put(w, "-line\n");
        const bool got = co_await reader.read_line(line);
        COMPOSE_CHECK((got && line == "half-line"));
        put(w, "half");
    }
};
TEST_CASE("io: BufReader::read_line") { check_all<ReadLine>(); }

struct FillBuf : Reader {
    Task<void> arm() {
        put(w, "abc");
        co_return;
    }
    auto completing() { return reader.fill_buf(); }
    void check(std::span<const std::byte> b) {
        COMPOSE_CHECK(text(b) == "abc");
        reader.consume(b.size());
    }
    auto blocking() { return reader.fill_buf(); }
    Task<void> recheck() {
        put(w, "late");
        const std::span<const std::byte> b = co_await reader.fill_buf();
        COMPOSE_CHECK(text(b) == "late");
        reader.consume(b.size());
    }
};
TEST_CASE("io: BufReader::fill_buf") { check_all<FillBuf>(); }

struct Flush {
    eddy::io::Pipe p = eddy::io::pipe();
    int r = p.read_end.get();
    DescriptorStream out{std::move(p.write_end)};
    BufWriter<DescriptorStream> writer{out};
    Flush() { shrink_pipe(out.native_handle()); }
    Task<void> arm() { co_await writer.write_all("hello"); }  // buffered: nothing written yet
    auto completing() { return writer.flush(); }
    void check(std::monostate) { COMPOSE_CHECK((writer.buffered() == 0 && drain_pipe(r) == "hello")); }
    Task<void> hold() {
        fill_pipe(out.native_handle());
        co_await writer.write_all("hello");
    }
    auto blocking() { return writer.flush(); }
    Task<void> recheck() {
        // The cancelled flush wrote nothing and kept the bytes: the next flush writes them once.
        COMPOSE_CHECK((pipe_bytes(r) == pipe_capacity(r) && writer.buffered() == 5));
        drain_pipe(r);
        co_await writer.flush();
        COMPOSE_CHECK(drain_pipe(r) == "hello");
        co_await hold();
    }
};
TEST_CASE("io: BufWriter::flush") { check_all<Flush>(); }

}  // namespace
