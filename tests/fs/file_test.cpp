// tests/fs/file_test.cpp: fs::File on temporary files: open with flags and mode, read_at and
// write_at at offsets (holes read as zeros, reads at or past the end give 0), write_all_at,
// read_exact_at (io::UnexpectedEof when the file ends first),
// size, fsync, close, and the errors (ENOENT, EEXIST, EISDIR, EBADF, EINVAL); a read-only
// open of a cached path done on the worker, and a FIFO that still waits off it.
//
// Every file lives in a fresh directory under /tmp (mkdtemp) that the test removes.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <eddy/fs/file.hpp>
#include <eddy/fs/read_file.hpp>
#include <eddy/io/file_descriptor.hpp>
#include <eddy/io/pipe.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/task.hpp>

#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::fs::File;
using eddy::test::bytes;
using eddy::test::error_of;
using eddy::test::run;
using eddy::test::TempDir;
using eddy::test::text;

namespace {

struct stat stat_of(const std::string& path) {
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    return st;
}

mode_t current_umask() {
    const mode_t m = ::umask(0);
    ::umask(m);
    return m;
}

struct Created {
    bool cloexec = false;
    std::uint64_t size_before = 99, size_after = 0;
    std::error_code exclusive_again;
};

Task<Created> create(std::string path) {
    Created c;
    File f = co_await File::open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    c.cloexec = (::fcntl(f.native_handle(), F_GETFD) & FD_CLOEXEC) != 0;  // always added
    c.size_before = f.size();
    co_await f.write_all_at(bytes("secret"), 0);
    c.size_after = f.size();
    f.close();
    c.exclusive_again = co_await error_of(File::open(path, O_WRONLY | O_CREAT | O_EXCL, 0600));
    co_return c;
}

}  // namespace

TEST_CASE("open with O_CREAT creates the file with the mode asked for; O_EXCL refuses an existing one") {
    TempDir dir;
    const std::string path = dir.file("created");
    Runtime rt(RuntimeConfig{.workers = 1});
    const Created c = run(rt, create(path));
    CHECK(c.cloexec);
    CHECK(c.size_before == 0);
    CHECK(c.size_after == 6);
    CHECK(c.exclusive_again == std::errc::file_exists);
    const struct stat st = stat_of(path);
    CHECK(S_ISREG(st.st_mode));
    CHECK((st.st_mode & 07777) == (0600 & ~current_umask()));
    CHECK(st.st_size == 6);

    // Another mode, to see the argument is used (not a fixed default).
    const std::string other = dir.file("other");
    run(rt, [](std::string p) -> Task<void> {
        File f = co_await File::open(std::move(p), O_WRONLY | O_CREAT, 0640);
        f.close();
    }(other));
    CHECK((stat_of(other).st_mode & 07777) == (0640 & ~current_umask()));
}

namespace {

struct Offsets {
    std::size_t wrote_head = 0, wrote_tail = 0;
    std::uint64_t size = 0;
    std::string head, tail, near_end;
    std::size_t near_end_count = 0, at_end = 99, past_end = 99;
    bool hole_is_zero = false;
};

Task<Offsets> offsets(std::string path) {
    Offsets o;
    File f = co_await File::open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    o.wrote_head = co_await f.write_at(bytes("hello"), 0);
    o.wrote_tail = co_await f.write_at(bytes("world"), 100);  // leaves a hole at 5..99
    o.size = f.size();

    std::array<std::byte, 5> five;
    o.head = text(std::span(five).first(co_await f.read_at(five, 0)));
    o.tail = text(std::span(five).first(co_await f.read_at(five, 100)));

    std::vector<std::byte> hole(95, std::byte{0x55});
    const std::size_t n = co_await f.read_at(hole, 5);
    o.hole_is_zero = n == hole.size();
    for (std::byte b : hole) o.hole_is_zero = o.hole_is_zero && b == std::byte{0};

    std::array<std::byte, 10> ten;
    o.near_end_count = co_await f.read_at(ten, 102);  // 3 bytes left: a short read
    o.near_end = text(std::span(ten).first(o.near_end_count));
    o.at_end = co_await f.read_at(ten, 105);
    o.past_end = co_await f.read_at(ten, 1 << 20);
    co_return o;
}

}  // namespace

TEST_CASE("write_at and read_at at offsets; a hole reads as zeros; at or past the end a read gives 0") {
    TempDir dir;
    Runtime rt(RuntimeConfig{.workers = 2});
    const Offsets o = run(rt, offsets(dir.file("sparse")));
    CHECK(o.wrote_head == 5);
    CHECK(o.wrote_tail == 5);
    CHECK(o.size == 105);
    CHECK(o.head == "hello");
    CHECK(o.tail == "world");
    CHECK(o.hole_is_zero);
    CHECK(o.near_end_count == 3);
    CHECK(o.near_end == "rld");
    CHECK(o.at_end == 0);
    CHECK(o.past_end == 0);
}

namespace {

/// Writes `payload` at `offset` with write_all_at, fsyncs, and reads the file back whole
/// with read_exact_at.
Task<std::vector<std::byte>> write_all_then_read(std::string path, const std::vector<std::byte>& payload,
                                                 std::uint64_t offset) {
    {
        File out = co_await File::open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        co_await out.write_all_at(payload, offset);
        co_await out.fsync();
        out.close();
    }
    File in = co_await File::open(path);
    std::vector<std::byte> back(in.size());
    co_await in.read_exact_at(back, 0);
    co_return back;
}

}  // namespace

TEST_CASE("write_all_at of 3 MiB at an offset, fsync, and the bytes read back") {
    TempDir dir;
    const std::vector<std::byte> payload = eddy::test::pattern(3 << 20, 7);
    Runtime rt(RuntimeConfig{.workers = 2});
    const std::vector<std::byte> back = run(rt, write_all_then_read(dir.file("big"), payload, 4096));
    REQUIRE(back.size() == payload.size() + 4096);
    bool prefix_zero = true;
    for (std::size_t i = 0; i < 4096; ++i) prefix_zero = prefix_zero && back[i] == std::byte{0};
    CHECK(prefix_zero);
    CHECK(std::equal(payload.begin(), payload.end(), back.begin() + 4096));
}

namespace {

struct Misuse {
    std::error_code missing, missing_dir, dir_for_writing, read_dir, write_read_only, fsync_pipe;
    std::error_code after_close_read, after_close_write, after_close_fsync, after_close_size;
    std::error_code exact_past_end;
    std::string exact_past_end_what;
    std::array<std::byte, 4> exact_tail{};
    int handle_after_close = 0;
};

Task<Misuse> misuse(std::string dir, std::string existing) {
    Misuse m;
    m.missing = co_await error_of(File::open(dir + "/no-such-file"));
    m.missing_dir = co_await error_of(File::open(dir + "/no-such-dir/f", O_WRONLY | O_CREAT, 0644));
    m.dir_for_writing = co_await error_of(File::open(dir, O_WRONLY));
    {
        File d = co_await File::open(dir, O_RDONLY);  // a directory opens for reading ...
        std::array<std::byte, 8> buf;
        m.read_dir = co_await error_of([](File& f, std::span<std::byte> b) -> Task<std::size_t> {
            co_return co_await f.read_at(b, 0);  // ... but cannot be read
        }(d, buf));
    }
    {
        File ro = co_await File::open(existing, O_RDONLY);
        m.write_read_only =
            co_await error_of([](File& f) -> Task<std::size_t> { co_return co_await f.write_at(bytes("x"), 0); }(ro));
    }
    {
        auto p = eddy::io::pipe();
        File pipe_file(std::move(p.read_end));  // adopts the descriptor
        m.fsync_pipe = co_await error_of(pipe_file.fsync());
    }
    {
        File in = co_await File::open(existing);  // "content": 7 bytes
        try {
            std::array<std::byte, 6> buf;
            co_await in.read_exact_at(buf, 3);  // 4 bytes are there
        } catch (const eddy::io::UnexpectedEof& e) {
            m.exact_past_end = e.code();
            m.exact_past_end_what = e.what();
        }
        co_await in.read_exact_at(m.exact_tail, 3);  // exactly to the end: fine
    }
    File f = co_await File::open(existing, O_RDWR);
    f.close();
    m.handle_after_close = f.native_handle();
    std::array<std::byte, 4> buf;
    m.after_close_read = co_await error_of(
        [](File& file, std::span<std::byte> b) -> Task<std::size_t> { co_return co_await file.read_at(b, 0); }(f, buf));
    m.after_close_write = co_await error_of(f.write_all_at(bytes("x"), 0));
    m.after_close_fsync = co_await error_of(f.fsync());
    try {
        (void)f.size();
    } catch (const std::system_error& e) {
        m.after_close_size = e.code();
    }
    co_return m;
}

}  // namespace

TEST_CASE("file errors: ENOENT, EISDIR, EBADF (wrong mode, closed), EINVAL (fsync of a pipe), ENODATA") {
    TempDir dir;
    const std::string existing = dir.file("existing");
    Runtime rt(RuntimeConfig{.workers = 1});
    run(rt, eddy::fs::write_file(existing, "content"));
    const Misuse m = run(rt, misuse(dir.path().string(), existing));
    CHECK(m.missing == std::errc::no_such_file_or_directory);
    CHECK(m.missing_dir == std::errc::no_such_file_or_directory);
    CHECK(m.dir_for_writing == std::errc::is_a_directory);
    CHECK(m.read_dir == std::errc::is_a_directory);
    CHECK(m.write_read_only == std::errc::bad_file_descriptor);
    CHECK(m.fsync_pipe == std::errc::invalid_argument);
    CHECK(m.handle_after_close == -1);
    CHECK(m.after_close_read == std::errc::bad_file_descriptor);
    CHECK(m.after_close_write == std::errc::bad_file_descriptor);
    CHECK(m.after_close_fsync == std::errc::bad_file_descriptor);
    CHECK(m.after_close_size == std::errc::bad_file_descriptor);
    CHECK(m.exact_past_end == std::errc::no_message_available);  // ENODATA
    CHECK(m.exact_past_end_what.find("ended after 4 of 6 bytes") != std::string::npos);
    CHECK(std::memcmp(m.exact_tail.data(), "tent", 4) == 0);
}

namespace {

Task<std::pair<std::error_code, bool>> close_reports_ebadf(std::string path) {
    File f = co_await File::open(path);
    // Close the descriptor behind the File's back: its own close() then fails with EBADF,
    // and reports it.
    ::close(f.native_handle());
    std::error_code ec;
    try {
        f.close();
    } catch (const std::system_error& e) {
        ec = e.code();
    }
    co_return std::pair{ec, f.native_handle() == -1};
}

}  // namespace

TEST_CASE("close() reports the error of close(2) and leaves the File empty either way") {
    TempDir dir;
    const std::string path = dir.file("f");
    Runtime rt(RuntimeConfig{.workers = 1});
    run(rt, eddy::fs::write_file(path, "x"));
    const auto [ec, empty] = run(rt, close_reports_ebadf(path));
    CHECK(ec == std::errc::bad_file_descriptor);
    CHECK(empty);
}

namespace {

Task<std::string> read_fifo(std::string path) {
    File f = co_await File::open(std::move(path));  // waits for a writer: off the worker
    std::array<std::byte, 16> buf;
    const std::size_t n = co_await f.read(buf);
    co_return text(std::span(buf).first(n));
}

Task<void> write_fifo(std::string path) {
    File f = co_await File::open(std::move(path), O_WRONLY);
    co_await f.write(bytes("through"));
}

Task<std::string> fifo_both_ways(std::string path) {
    // One worker: if opening the read end blocked it, the writer would never run.
    auto reader = eddy::spawn(read_fifo(path));
    co_await eddy::yield_now();
    co_await write_fifo(std::move(path));
    co_return co_await std::move(reader);
}

}  // namespace

TEST_CASE("opening a cached file to read takes no trip through the reactor; a FIFO still waits off the worker") {
    TempDir dir;
    const std::string path = dir.file("cached");
    Runtime rt(RuntimeConfig{.workers = 1});
    run(rt, eddy::fs::write_file(path, "cached content"));
    run(rt, eddy::fs::read_file(path));  // the path's dentries and inode are in the caches now
    const std::uint64_t before = rt.metrics().reactor.operations;
    const std::uint64_t size = run(rt, [](std::string p) -> Task<std::uint64_t> {
        File f = co_await File::open(std::move(p));
        co_return f.size();
    }(path));
    CHECK(size == 14);
    CHECK(rt.metrics().reactor.operations == before);  // opened on the worker
    // Errors are the same either way: a missing name in a cached directory.
    CHECK(run(rt, error_of(File::open(dir.file("missing")))) == std::errc::no_such_file_or_directory);

    const std::string fifo = dir.file("fifo");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK(run(rt, fifo_both_ways(fifo)) == "through");
}
