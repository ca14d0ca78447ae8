// tests/compose/fs_test.cpp: fs::File::read and write, and fs::read_file, under every
// combinator (tests/compose/compose.hpp). A regular file never makes a read wait, so the
// blocking forms use a FIFO in a scratch directory: opened O_RDWR by File::open (which then
// never waits for a peer), a read waits for data and a write for room, exactly as a pipe.
// A FIFO also keeps the completing forms off the disk, whose completions the paused clock
// would not wait for (eddy/runtime/time.hpp, "Quiet").
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <fstream>
#include <optional>
#include <span>
#include <string>

#include <eddy/eddy.hpp>

#include "compose/compose.hpp"

using eddy::Task;
using eddy::fs::File;
using eddy::test::bytes;
using eddy::test::text;
using namespace eddy::test::compose;  // check_all and the pipe helpers

namespace {

/// A FIFO opened as a File, O_RDWR: the operations and the test's own writes and reads use it.
struct Fifo {
    eddy::test::TempDir dir;
    std::string path = dir.file("fifo");
    std::optional<File> file;
    int fd = -1;
    Task<void> setup() {
        REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
        file.emplace(co_await File::open(path, O_RDWR));
        fd = file->native_handle();
    }
};

struct FileRead : Fifo {
    std::array<std::byte, 64> buf{};
    Task<void> arm() {
        put(fd, "abc");
        co_return;
    }
    auto completing() { return file->read(buf); }
    void check(std::size_t n) { COMPOSE_CHECK(text(std::span(buf).first(n)) == "abc"); }
    auto blocking() { return file->read(buf); }
    Task<void> recheck() {
        put(fd, "late");  // after the read gave up: all of it is still there
        const std::size_t n = co_await file->read(buf);
        COMPOSE_CHECK(text(std::span(buf).first(n)) == "late");
    }
};
TEST_CASE("fs: File::read") { check_all<FileRead>(); }

struct FileWrite : Fifo {
    Task<void> setup() {
        co_await Fifo::setup();
        shrink_pipe(fd);
    }
    auto completing() { return file->write(bytes("hello")); }
    void check(std::size_t n) { COMPOSE_CHECK((n == 5 && drain_pipe(fd) == "hello")); }
    Task<void> hold() {
        fill_pipe(fd);
        co_return;
    }
    auto blocking() { return file->write(bytes("hello")); }
    Task<void> recheck() {
        COMPOSE_CHECK(pipe_bytes(fd) == pipe_capacity(fd));  // the cancelled write wrote nothing
        drain_pipe(fd);
        const std::size_t n = co_await file->write(bytes("hello"));
        COMPOSE_CHECK((n == 5 && drain_pipe(fd) == "hello"));
        fill_pipe(fd);
    }
};
TEST_CASE("fs: File::write") { check_all<FileWrite>(); }

// A Task: the spawning combinators take it too. No blocking form: a regular file never
// makes it wait, and it reads at offsets (pread), which a FIFO refuses with ESPIPE.
struct ReadFile {
    eddy::test::TempDir dir;
    std::string path = dir.file("data");
    ReadFile() { std::ofstream(path) << "contents"; }
    auto completing() { return eddy::fs::read_file(path); }
    void check(std::string s) { COMPOSE_CHECK(s == "contents"); }
};
TEST_CASE("fs: fs::read_file") { check_all<ReadFile>(); }

}  // namespace
