// tests/fs/fs_ops_test.cpp: fs::remove_file, fs::rename, fs::copy, fs::OpenOptions, and File
// as a stream (read/write at the position), set_len and append:
//   - rename moves a file (the old name is gone); across a missing directory ENOENT naming
//     both paths; remove_file of a directory is EISDIR, of a missing file ENOENT;
//   - copy gives the byte count, the same bytes (1 MiB) and the source's permissions; a
//     directory is EISDIR;
//   - OpenOptions: append writes at the end; create_new on an existing file is EEXIST;
//     truncate empties; bad combinations are std::invalid_argument;
//   - set_len truncates and extends; a BufReader reads a File's lines.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>

#include <eddy/fs/file.hpp>
#include <eddy/fs/metadata.hpp>
#include <eddy/fs/open_options.hpp>
#include <eddy/fs/ops.hpp>
#include <eddy/io/buf_reader.hpp>
#include <eddy/io/stream_ops.hpp>
#include <eddy/runtime/runtime.hpp>

#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::fs::OpenOptions;
using eddy::test::run;

namespace {

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::error_code code_of(Runtime& rt, auto task, std::string* what = nullptr) {
    try {
        run(rt, std::move(task));
    } catch (const std::system_error& e) {
        if (what != nullptr) *what = e.what();
        return e.code();
    }
    return {};
}

}  // namespace

TEST_CASE("rename and remove_file, and their errors") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::test::TempDir dir;
    std::ofstream(dir.file("a")) << "content";
    run(rt, eddy::fs::rename(dir.file("a"), dir.file("b")));
    CHECK(slurp(dir.file("b")) == "content");
    CHECK(::access(dir.file("a").c_str(), F_OK) != 0);
    std::string what;
    CHECK(code_of(rt, eddy::fs::rename(dir.file("b"), dir.file("no/such/dir")), &what) ==
          std::errc::no_such_file_or_directory);
    CHECK(what.find(dir.file("b")) != std::string::npos);
    CHECK(what.find(dir.file("no/such/dir")) != std::string::npos);
    run(rt, eddy::fs::remove_file(dir.file("b")));
    CHECK(::access(dir.file("b").c_str(), F_OK) != 0);
    CHECK(code_of(rt, eddy::fs::remove_file(dir.file("b"))) == std::errc::no_such_file_or_directory);
    CHECK(code_of(rt, eddy::fs::remove_file(dir.path().string())) == std::errc::is_a_directory);
}

TEST_CASE("copy: the bytes, the count and the permissions") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::test::TempDir dir;
    std::string data(1 << 20, '\0');
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 % 251);
    std::ofstream(dir.file("src"), std::ios::binary) << data;
    REQUIRE(::chmod(dir.file("src").c_str(), 0600) == 0);
    CHECK(run(rt, eddy::fs::copy(dir.file("src"), dir.file("dst"))) == data.size());
    CHECK(slurp(dir.file("dst")) == data);
    CHECK(run(rt, eddy::fs::metadata(dir.file("dst"))).permissions == 0600);
    CHECK(code_of(rt, eddy::fs::copy(dir.path().string(), dir.file("x"))) == std::errc::is_a_directory);
    CHECK(code_of(rt, eddy::fs::copy(dir.file("missing"), dir.file("x"))) == std::errc::no_such_file_or_directory);
}

TEST_CASE("OpenOptions: append, create_new, truncate, and combinations that cannot work") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::test::TempDir dir;
    const std::string log = dir.file("log");
    for (const char* line : {"one\n", "two\n"}) {
        run(rt, [&]() -> Task<void> {
            auto f = co_await OpenOptions().append(true).create(true).open(log);
            co_await eddy::io::write_all(f, eddy::test::bytes(line));
        }());
    }
    CHECK(slurp(log) == "one\ntwo\n");
    CHECK(code_of(rt, OpenOptions().write(true).create_new(true).open(log)) == std::errc::file_exists);
    run(rt, OpenOptions().write(true).truncate(true).open(log));
    CHECK(slurp(log).empty());
    CHECK_THROWS_AS(OpenOptions().flags(), std::invalid_argument);
    CHECK_THROWS_AS(OpenOptions().read(true).truncate(true).flags(), std::invalid_argument);
    CHECK_THROWS_AS(OpenOptions().read(true).create(true).flags(), std::invalid_argument);
    CHECK_THROWS_AS(OpenOptions().append(true).truncate(true).flags(), std::invalid_argument);
    std::string what;
    CHECK(code_of(rt, OpenOptions().read(true).open(dir.file("missing")), &what) ==
          std::errc::no_such_file_or_directory);
    CHECK(what.find("missing") != std::string::npos);
}

TEST_CASE("set_len, and a BufReader over a File read at its position") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::test::TempDir dir;
    const std::string path = dir.file("lines");
    std::ofstream(path) << "alpha\nbeta\ngamma\n";
    auto lines = run(rt, [&]() -> Task<std::vector<std::string>> {
        auto f = co_await eddy::fs::File::open(path);
        eddy::io::BufReader in(f, 4);
        std::vector<std::string> out;
        std::string line;
        while (co_await in.read_line(line)) out.push_back(line);
        co_return out;
    }());
    CHECK(lines == std::vector<std::string>{"alpha", "beta", "gamma"});
    run(rt, [&]() -> Task<void> {
        auto f = co_await OpenOptions().write(true).open(path);
        co_await f.set_len(5);
        CHECK((co_await f.metadata()).size == 5);
        co_await f.set_len(100);
        CHECK((co_await f.metadata()).size == 100);
    }());
    CHECK(slurp(path).substr(0, 5) == "alpha");
}
