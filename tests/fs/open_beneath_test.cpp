// tests/fs/open_beneath_test.cpp: fs::File::open_beneath and fs::OpenOptions::open_beneath
// keep every open inside their directory. A tree under a scratch directory:
//
//     TMP/outside.txt                 "secret"
//     TMP/root/a.txt                  "inside"
//     TMP/root/sub/b.txt              "deeper"
//     TMP/root/in -> sub/b.txt        a link that stays inside
//     TMP/root/sub/up -> ../a.txt     one that goes up, but not above the root
//     TMP/root/out -> ../outside.txt  one that leaves by a relative target
//     TMP/root/abs -> TMP/outside.txt one that leaves by an absolute target
//     TMP/root/dir -> TMP             a directory outside
//
// Reads go first through the worker's cached attempt; an open to write always goes to the
// reactor (IORING_OP_OPENAT2, or the readiness driver's file pool), so both paths are seen
// refusing. The suite also runs under tools/no-io-uring (the test command's second pass).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <eddy/fs/file.hpp>
#include <eddy/fs/open_options.hpp>
#include <eddy/fs/read_file.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/tasks/task.hpp>

#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::fs::File;
using eddy::fs::OpenOptions;
using eddy::test::bytes;
using eddy::test::error_of;
using eddy::test::run;
using eddy::test::TempDir;
using eddy::test::text;

namespace {

/// The tree of the file comment; `root()` is TMP/root.
struct Tree {
    TempDir tmp;
    std::string root() const { return tmp.file("root"); }

    Tree() {
        write(tmp.file("outside.txt"), "secret");
        REQUIRE(::mkdir(root().c_str(), 0755) == 0);
        REQUIRE(::mkdir((root() + "/sub").c_str(), 0755) == 0);
        write(root() + "/a.txt", "inside");
        write(root() + "/sub/b.txt", "deeper");
        link("sub/b.txt", root() + "/in");
        link("../a.txt", root() + "/sub/up");
        link("../outside.txt", root() + "/out");
        link(tmp.file("outside.txt"), root() + "/abs");
        link(tmp.path().string(), root() + "/dir");
    }

    static void write(const std::string& path, const std::string& content) {
        const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        REQUIRE(fd >= 0);
        REQUIRE(::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()));
        ::close(fd);
    }
    static void link(const std::string& target, const std::string& at) {
        REQUIRE(::symlink(target.c_str(), at.c_str()) == 0);
    }
};

/// The content of `path` opened beneath `root`, read whole.
Task<std::string> read_beneath(std::string root, std::string path) {
    const File dir = co_await File::open(std::move(root), O_RDONLY | O_DIRECTORY);
    File f = co_await File::open_beneath(dir, std::move(path));
    std::string content(64, '\0');
    const std::size_t n = co_await f.read_at(std::as_writable_bytes(std::span(content)), 0);
    content.resize(n);
    co_return content;
}

/// An open beneath `root` of `path` to write (never the worker's cached attempt).
Task<void> write_beneath(std::string root, std::string path, std::string content) {
    const File dir = co_await File::open(std::move(root), O_RDONLY | O_DIRECTORY);
    File f = co_await OpenOptions().write(true).create(true).truncate(true).open_beneath(dir, std::move(path));
    co_await f.write_all_at(bytes(content), 0);
}

}  // namespace

TEST_CASE("open_beneath opens what lies inside, following links that stay inside") {
    const Tree tree;
    Runtime rt(RuntimeConfig{.workers = 1});
    CHECK(run(rt, read_beneath(tree.root(), "a.txt")) == "inside");
    CHECK(run(rt, read_beneath(tree.root(), "sub/b.txt")) == "deeper");
    CHECK(run(rt, read_beneath(tree.root(), "./sub/../a.txt")) == "inside");  // ".." that stays inside
    CHECK(run(rt, read_beneath(tree.root(), "in")) == "deeper");
    CHECK(run(rt, read_beneath(tree.root(), "sub/up")) == "inside");
    // Through the reactor: a new file, and one that is there.
    const std::uint64_t ops = rt.metrics().reactor.operations;
    run(rt, write_beneath(tree.root(), "sub/new.txt", "made"));
    run(rt, write_beneath(tree.root(), "in", "again"));  // through the inside link to sub/b.txt
    CHECK(rt.metrics().reactor.operations >= ops + 2);
    CHECK(run(rt, eddy::fs::read_file(tree.root() + "/sub/new.txt")) == "made");
    CHECK(run(rt, eddy::fs::read_file(tree.root() + "/sub/b.txt")) == "again");
}

TEST_CASE("open_beneath refuses every way out with EXDEV, on the worker and through the reactor") {
    const Tree tree;
    Runtime rt(RuntimeConfig{.workers = 1});
    const std::vector<std::string> ways_out = {
        "out",              // a link with a relative target outside
        "abs",              // a link with an absolute target
        "dir/outside.txt",  // through a link to a directory outside
        "../outside.txt",   // ".." above the root
        "sub/../../outside.txt",
        tree.tmp.file("outside.txt"),  // an absolute path, even to a file that exists
    };
    for (const std::string& way : ways_out) {
        CAPTURE(way);
        CHECK(run(rt, error_of(read_beneath(tree.root(), way))) == std::errc::cross_device_link);
        CHECK(run(rt, error_of(write_beneath(tree.root(), way, "overwritten"))) == std::errc::cross_device_link);
    }
    // Nothing outside was read or written, and nothing was made.
    CHECK(run(rt, eddy::fs::read_file(tree.tmp.file("outside.txt"))) == "secret");
    // What is simply not there is ENOENT, as with File::open.
    CHECK(run(rt, error_of(read_beneath(tree.root(), "missing.txt"))) == std::errc::no_such_file_or_directory);
}

TEST_CASE("open_beneath's errors name the call and the path; a bad OpenOptions is invalid_argument") {
    const Tree tree;
    Runtime rt(RuntimeConfig{.workers = 1});
    const std::string what = run(rt, [](std::string root) -> Task<std::string> {
        try {
            (void)co_await read_beneath(std::move(root), "out");
        } catch (const std::system_error& e) {
            co_return e.what();
        }
        co_return "";
    }(tree.root()));
    CHECK(what.find("eddy::fs::File::open_beneath") != std::string::npos);
    CHECK(what.find("out") != std::string::npos);
    // A combination that cannot work is thrown where the task is awaited, as open() does.
    const bool invalid = run(rt, [](std::string root) -> Task<bool> {
        const File dir = co_await File::open(std::move(root), O_RDONLY | O_DIRECTORY);
        Task<File> t = OpenOptions().truncate(true).open_beneath(dir, "a.txt");  // truncate without write
        try {
            (void)co_await std::move(t);
        } catch (const std::invalid_argument&) {
            co_return true;
        }
        co_return false;
    }(tree.root()));
    CHECK(invalid);
    // A descriptor that is no directory: ENOTDIR.
    CHECK(run(rt, [](std::string file) -> Task<std::error_code> {
              const File notdir = co_await File::open(std::move(file));
              co_return co_await error_of(File::open_beneath(notdir, "x"));
          }(tree.root() + "/a.txt")) == std::errc::not_a_directory);
}
