// tests/fs/read_file_test.cpp: fs::read_file and fs::write_file: round trips of an empty
// file, of sizes around read_file's buffer growth (4 KiB first guess, doubling), of a 5 MiB
// binary file; write_file truncating a longer file and creating with mode 0644; a /proc file
// whose stat size is 0 but which has content; and the errors (ENOENT, EISDIR).
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <eddy/fs/read_file.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/tasks/task.hpp>

#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::fs::read_file;
using eddy::fs::write_file;
using eddy::test::error_of;
using eddy::test::run;
using eddy::test::TempDir;

namespace {

// "f<n>". Built with append(): GCC 12 at -O3 flags `"f" + std::to_string(n)` with a false
// -Wrestrict (the same workaround as io/net/socket_addr.cpp).
template <class N>
std::string numbered(N n) {
    return std::string("f").append(std::to_string(n));
}

Task<std::string> round_trip(std::string path, std::string contents) {
    co_await write_file(path, contents);
    co_return co_await read_file(path);
}

std::string binary(std::size_t n, std::uint32_t seed) {
    const auto p = eddy::test::pattern(n, seed);
    return eddy::test::text(p);
}

off_t size_on_disk(const std::string& path) {
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    return st.st_size;
}

}  // namespace

TEST_CASE("write_file then read_file gives the same bytes, at every size around the buffer's growth") {
    TempDir dir;
    Runtime rt(RuntimeConfig{.workers = 2});
    // 0: the empty file. 4095..4097 and 8192/8193: read_file guesses from the size (+1 to
    // see end of file without growing) and doubles when the file turns out longer.
    for (const std::size_t n : {0, 1, 100, 4095, 4096, 4097, 8191, 8192, 8193, 65536}) {
        CAPTURE(n);
        const std::string path = dir.file(numbered(n));
        const std::string contents = binary(n, static_cast<std::uint32_t>(n) + 3);
        const std::string back = run(rt, round_trip(path, contents));
        CHECK(back.size() == n);
        CHECK(back == contents);
        CHECK(size_on_disk(path) == static_cast<off_t>(n));
    }
}

TEST_CASE("a 5 MiB binary file (with NUL bytes) round-trips") {
    TempDir dir;
    std::string contents = binary(5 << 20, 11);
    contents[0] = '\0';
    contents[contents.size() / 2] = '\0';
    Runtime rt(RuntimeConfig{.workers = 2});
    const std::string back = run(rt, round_trip(dir.file("big"), contents));
    CHECK(back.size() == contents.size());
    CHECK(back == contents);
}

TEST_CASE("write_file truncates a longer file and creates new files with mode 0644") {
    TempDir dir;
    const std::string path = dir.file("f");
    Runtime rt(RuntimeConfig{.workers = 1});
    CHECK(run(rt, round_trip(path, std::string(10000, 'a'))).size() == 10000);
    CHECK(run(rt, round_trip(path, "short")) == "short");
    CHECK(size_on_disk(path) == 5);
    CHECK(run(rt, round_trip(path, "")).empty());
    CHECK(size_on_disk(path) == 0);

    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    const mode_t mask = ::umask(0);
    ::umask(mask);
    CHECK((st.st_mode & 07777) == (0644 & ~mask));
}

TEST_CASE("read_file reads a /proc file whose stat size is 0 to its end") {
    struct stat st {};
    REQUIRE(::stat("/proc/self/status", &st) == 0);
    CHECK(st.st_size == 0);  // what makes this case worth testing
    Runtime rt(RuntimeConfig{.workers = 1});
    const std::string status = run(rt, read_file("/proc/self/status"));
    CHECK(status.rfind("Name:", 0) == 0);  // the first line
    CHECK(status.find("\nPid:\t" + std::to_string(::getpid()) + "\n") != std::string::npos);
    CHECK(status.find("\nThreads:") != std::string::npos);
    REQUIRE_FALSE(status.empty());
    CHECK(status.back() == '\n');  // read to the end, not cut at some buffer size
    CHECK(status.size() > 500);
    CHECK(status.find('\0') == std::string::npos);
}

TEST_CASE("several read_file calls run at once") {
    TempDir dir;
    Runtime rt(RuntimeConfig{.workers = 2});
    std::vector<std::string> contents;
    for (int i = 0; i < 16; ++i) {
        contents.push_back(binary(static_cast<std::size_t>(1000 * i + 17), static_cast<std::uint32_t>(i)));
        run(rt, write_file(dir.file(numbered(i)), contents.back()));
    }
    const auto all = run(rt, [](const TempDir& d) -> Task<std::vector<std::string>> {
        std::vector<Task<std::string>> reads;
        for (int i = 0; i < 16; ++i) reads.push_back(read_file(d.file(numbered(i))));
        co_return co_await eddy::when_all(std::move(reads));
    }(dir));
    REQUIRE(all.size() == contents.size());
    for (std::size_t i = 0; i < all.size(); ++i) {
        CAPTURE(i);
        CHECK(all[i] == contents[i]);
    }
}

namespace {

struct Errors {
    std::error_code read_missing, read_dir, write_missing_dir, write_dir;
};

Task<Errors> errors(std::string dir) {
    Errors e;
    e.read_missing = co_await error_of(read_file(dir + "/missing"));
    e.read_dir = co_await error_of(read_file(dir));
    e.write_missing_dir = co_await error_of(write_file(dir + "/missing/f", "x"));
    e.write_dir = co_await error_of(write_file(dir, "x"));
    co_return e;
}

}  // namespace

TEST_CASE("read_file and write_file errors: ENOENT for a missing file or directory, EISDIR for a directory") {
    TempDir dir;
    Runtime rt(RuntimeConfig{.workers = 1});
    const Errors e = run(rt, errors(dir.path().string()));
    CHECK(e.read_missing == std::errc::no_such_file_or_directory);
    CHECK(e.read_dir == std::errc::is_a_directory);
    CHECK(e.write_missing_dir == std::errc::no_such_file_or_directory);
    CHECK(e.write_dir == std::errc::is_a_directory);
}
