// tests/reactor/awaiter_move_test.cpp: the I/O operations on descriptors, files and timers move
// until they are first awaited (a combinator that owns its operation moves it into itself),
// and the moved operation does the work: a pipe or file read fills the buffer it was given,
// a sleep waits out its deadline and still obeys its token, an interval tick keeps its
// claim on the schedule. Dropped unawaited, a moved operation and its source leave nothing
// queued or claimed. The socket operations are in tests/net/awaiter_move_test.cpp.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <fstream>
#include <optional>
#include <span>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <type_traits>
#include <utility>

#include <eddy/fs/file.hpp>
#include <eddy/io/buf_reader.hpp>
#include <eddy/io/buf_writer.hpp>
#include <eddy/io/descriptor_stream.hpp>
#include <eddy/time/interval.hpp>
#include <eddy/io/pipe.hpp>
#include <eddy/io/read_write.hpp>
#include <eddy/io/readiness.hpp>
#include <eddy/time/sleep.hpp>
#include <eddy/io/stdio.hpp>
#include <eddy/time/with_deadline.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/net_helpers.hpp"
#include "support/move_ops.hpp"

using eddy::Task;
using eddy::io::DescriptorStream;
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

using Clock = std::chrono::steady_clock;

static_assert(kMovable<decltype(eddy::io::read(0, some_buf()))>);
static_assert(kMovable<decltype(eddy::io::write(1, some_data()))>);
static_assert(kMovable<decltype(eddy::io::readv(0, some_iov()))>);
static_assert(kMovable<decltype(eddy::io::writev(1, some_iov()))>);
static_assert(kMovable<decltype(ref<eddy::fs::File>().read(some_buf()))>);
static_assert(kMovable<decltype(ref<eddy::fs::File>().read_at(some_buf(), 0))>);
static_assert(kMovable<decltype(ref<eddy::fs::File>().write(some_data()))>);
static_assert(kMovable<decltype(ref<eddy::fs::File>().write_at(some_data(), 0))>);
static_assert(kMovable<decltype(ref<DescriptorStream>().read(some_buf()))>);
static_assert(kMovable<decltype(ref<DescriptorStream>().write(some_data()))>);
static_assert(kMovable<decltype(eddy::io::stdin().read(some_buf()))>);
static_assert(kMovable<decltype(eddy::io::stdout().write(some_data()))>);
static_assert(kMovable<decltype(eddy::io::readable(0))>);
static_assert(kMovable<decltype(eddy::io::writable(1))>);
static_assert(kMovable<decltype(eddy::io::poll(0, POLLIN))>);
static_assert(kMovable<decltype(eddy::sleep(std::chrono::seconds(1)))>);
static_assert(kMovable<decltype(eddy::sleep_until(Clock::now()))>);
static_assert(kMovable<decltype(ref<eddy::Interval>().tick())>);
static_assert(kMovable<decltype(eddy::this_task::deadline())>);
static_assert(kMovable<decltype(ref<eddy::io::BufReader<DescriptorStream>>().fill_buf())>);
static_assert(kMovable<decltype(ref<eddy::io::BufReader<DescriptorStream>>().read_exact(some_buf()))>);
static_assert(kMovable<decltype(ref<eddy::io::BufReader<DescriptorStream>>().read_line(ref<std::string>()))>);
static_assert(kMovable<decltype(ref<eddy::io::BufWriter<DescriptorStream>>().write_all(some_data()))>);
static_assert(kMovable<decltype(ref<eddy::io::BufWriter<DescriptorStream>>().flush())>);
// Moved into place once, never assigned over.
static_assert(!std::is_move_assignable_v<decltype(eddy::io::read(0, some_buf()))>);
static_assert(!std::is_move_assignable_v<decltype(eddy::sleep(std::chrono::seconds(1)))>);
static_assert(!std::is_move_assignable_v<decltype(ref<eddy::Interval>().tick())>);

/// Writes `s` to `fd` once the reader had the chance to wait for it.
Task<void> write_later(int fd, std::string s) {
    co_await eddy::yield_now();
    co_await eddy::sleep(std::chrono::milliseconds(1));
    co_await eddy::io::write(fd, bytes(s));
}

Task<void> stop_later(std::stop_source& source) {
    co_await eddy::yield_now();
    source.request_stop();
}

}  // namespace

TEST_SUITE("reactor/awaiter_move") {

TEST_CASE("a moved pipe read waits for the writer and fills the buffer it was given") {
    eddy::io::Pipe p = eddy::io::pipe();
    const std::string got = run_alone([](eddy::io::Pipe& pipe) -> Task<std::string> {
        std::array<std::byte, 16> buf{};
        auto op = relocate([&] { return eddy::io::read(pipe.read_end.get(), buf); });
        eddy::spawn(write_later(pipe.write_end.get(), "through"));
        const std::size_t n = co_await op;
        co_return text(std::span(buf).first(n));
    }(p));
    CHECK(got == "through");
}

TEST_CASE("a moved readiness wait reports the pipe readable") {
    eddy::io::Pipe p = eddy::io::pipe();
    const unsigned revents = run_alone([](eddy::io::Pipe& pipe) -> Task<unsigned> {
        auto op = relocate([&] { return eddy::io::readable(pipe.read_end.get()); });
        eddy::spawn(write_later(pipe.write_end.get(), "x"));
        co_return co_await op;
    }(p));
    CHECK((revents & POLLIN) != 0);
}

TEST_CASE("a moved file read and write_at reach the file") {
    eddy::test::TempDir dir;
    const std::string path = dir.file("data.txt");
    std::ofstream(path) << "file contents";
    const std::string got = run_alone([](std::string file_path) -> Task<std::string> {
        eddy::fs::File f = co_await eddy::fs::File::open(file_path, O_RDWR);
        auto write = relocate([&] { return f.write_at(bytes("FILE"), 0); });
        CHECK(co_await write == 4);
        std::array<std::byte, 64> buf{};
        auto read = relocate([&] { return f.read(buf); });
        const std::size_t n = co_await read;
        co_return text(std::span(buf).first(n));
    }(path));
    CHECK(got == "FILE contents");
}

TEST_CASE("a moved sleep waits out its deadline; a moved cancellable sleep obeys its token") {
    const bool ok = run_alone([]() -> Task<bool> {
        const auto deadline = Clock::now() + std::chrono::milliseconds(5);
        auto nap = relocate([&] { return eddy::sleep_until(deadline); });
        co_await nap;
        const bool on_time = Clock::now() >= deadline;  // never early
        std::stop_source source;
        auto long_nap = relocate([&] { return eddy::sleep(std::chrono::hours(1), source.get_token()); });
        eddy::spawn(stop_later(source));
        bool cancelled = false;
        try {
            co_await long_nap;
        } catch (const eddy::OperationCancelled&) {
            cancelled = true;
        }
        co_return (on_time && cancelled);  // (): clang-format 14 misreads `co_return a &&`
    }());
    CHECK(ok);
}

TEST_CASE("a moved interval tick keeps the claim and takes the tick") {
    const bool ok = run_alone([]() -> Task<bool> {
        eddy::Interval iv = eddy::interval(std::chrono::milliseconds(2));
        const auto period = iv.period();
        bool claimed = false;
        Clock::time_point t0;
        {
            auto tick = relocate([&] { return iv.tick(); });
            try {
                (void)iv.tick();  // the moved tick still holds the claim
            } catch (const std::logic_error&) {
                claimed = true;
            }
            t0 = co_await tick;
        }
        const Clock::time_point t1 = co_await relocate([&] { return iv.tick(); });
        (void)relocate([&] { return iv.tick(); });  // dropped unawaited: the claim is released once
        iv.reset();                                 // throws if it were still claimed
        co_return (claimed && t1 - t0 == period);
    }());
    CHECK(ok);
}

TEST_CASE("moved BufReader and BufWriter operations read and write through the pipe") {
    eddy::io::Pipe p = eddy::io::pipe();
    DescriptorStream in(std::move(p.read_end));
    DescriptorStream out(std::move(p.write_end));
    const std::string got = run_alone([](DescriptorStream& src, DescriptorStream& dst) -> Task<std::string> {
        eddy::io::BufWriter writer(dst, 64);
        eddy::io::BufReader reader(src, 64);
        auto put = relocate([&] { return writer.write_all(std::string_view("first line\nsecond")); });
        co_await put;
        auto flush = relocate([&] { return writer.flush(); });
        co_await flush;
        std::string line;
        auto get = relocate([&] { return reader.read_line(line); });
        CHECK(co_await get);
        std::array<std::byte, 3> three{};
        auto exact = relocate([&] { return reader.read_exact(three); });
        co_await exact;
        auto fill = relocate([&] { return reader.fill_buf(); });
        const std::span<const std::byte> rest = co_await fill;
        co_return line + "|" + text(three) + "|" + text(rest);
    }(in, out));
    CHECK(got == "first line|sec|ond");
}

TEST_CASE("I/O operations moved and dropped unawaited leave nothing behind") {
    eddy::io::Pipe p = eddy::io::pipe();
    const std::string got = run_alone([](eddy::io::Pipe& pipe) -> Task<std::string> {
        std::array<std::byte, 8> buf{};
        (void)relocate([&] { return eddy::io::read(pipe.read_end.get(), buf); });
        (void)relocate([&] { return eddy::io::readable(pipe.read_end.get()); });
        (void)relocate([&] { return eddy::sleep(std::chrono::milliseconds(1)); });
        // The pipe is untouched: the next read gets what is written.
        co_await eddy::io::write(pipe.write_end.get(), bytes("after"));
        const std::size_t n = co_await eddy::io::read(pipe.read_end.get(), buf);
        co_return text(std::span(buf).first(n));
    }(p));
    CHECK(got == "after");
}

}  // TEST_SUITE("reactor/awaiter_move")
