// tests/fs/dir_test.cpp: fs::create_dir, create_dir_all, remove_dir, remove_dir_all,
// read_dir:
//   - create_dir makes one directory (EEXIST the second time); create_dir_all makes a chain
//     and accepts one that exists, but a file in the way is ENOTDIR;
//   - read_dir lists files, directories and symlinks with their types, without . and ..;
//   - remove_dir of a non-empty directory is ENOTEMPTY; remove_dir_all removes a tree and
//     does not follow a symlink out of it; both name the path when it is missing (ENOENT).
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include <eddy/fs/dir.hpp>
#include <eddy/fs/metadata.hpp>
#include <eddy/runtime/runtime.hpp>

#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::fs::FileType;
using eddy::test::run;

namespace {

std::errc error_of_call(Runtime& rt, eddy::Task<void> t) {
    try {
        run(rt, std::move(t));
    } catch (const std::system_error& e) {
        return static_cast<std::errc>(e.code().default_error_condition().value());
    }
    return std::errc{};
}

bool exists(const std::string& p) {
    struct stat st {};
    return ::lstat(p.c_str(), &st) == 0;
}

}  // namespace

TEST_CASE("create_dir, create_dir_all and what is in the way") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::test::TempDir dir;
    run(rt, eddy::fs::create_dir(dir.file("one")));
    CHECK(run(rt, eddy::fs::metadata(dir.file("one"))).is_dir());
    CHECK(error_of_call(rt, eddy::fs::create_dir(dir.file("one"))) == std::errc::file_exists);
    run(rt, eddy::fs::create_dir_all(dir.file("a/b/c")));
    CHECK(run(rt, eddy::fs::metadata(dir.file("a/b/c"))).is_dir());
    run(rt, eddy::fs::create_dir_all(dir.file("a/b/c")));  // there already: fine
    std::ofstream(dir.file("a/file")) << "x";
    CHECK(error_of_call(rt, eddy::fs::create_dir_all(dir.file("a/file/d"))) == std::errc::not_a_directory);
}

TEST_CASE("read_dir lists entries with their types") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::test::TempDir dir;
    std::ofstream(dir.file("f")) << "x";
    REQUIRE(::mkdir(dir.file("d").c_str(), 0755) == 0);
    REQUIRE(::symlink("f", dir.file("l").c_str()) == 0);
    auto entries = run(rt, eddy::fs::read_dir(dir.path().string()));
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    REQUIRE(entries.size() == 3);
    CHECK(entries[0].name == "d");
    CHECK(entries[0].type == FileType::kDirectory);
    CHECK(entries[1].name == "f");
    CHECK(entries[1].type == FileType::kFile);
    CHECK(entries[2].name == "l");
    CHECK(entries[2].type == FileType::kSymlink);
    try {
        run(rt, eddy::fs::read_dir(dir.file("missing")));
        FAIL("no exception");
    } catch (const std::system_error& e) {
        CHECK(e.code() == std::errc::no_such_file_or_directory);
        CHECK(std::string(e.what()).find("missing") != std::string::npos);
    }
}

TEST_CASE("remove_dir and remove_dir_all") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::test::TempDir dir;
    eddy::test::TempDir outside;
    std::ofstream(outside.file("keep")) << "keep";
    run(rt, eddy::fs::create_dir_all(dir.file("t/x/y")));
    std::ofstream(dir.file("t/x/y/file")) << "x";
    REQUIRE(::symlink(outside.path().c_str(), dir.file("t/out").c_str()) == 0);
    CHECK(error_of_call(rt, eddy::fs::remove_dir(dir.file("t"))) == std::errc::directory_not_empty);
    run(rt, eddy::fs::remove_dir_all(dir.file("t")));
    CHECK_FALSE(exists(dir.file("t")));
    CHECK(exists(outside.file("keep")));  // the symlink went, not what it pointed to
    run(rt, eddy::fs::create_dir(dir.file("empty")));
    run(rt, eddy::fs::remove_dir(dir.file("empty")));
    CHECK_FALSE(exists(dir.file("empty")));
    CHECK(error_of_call(rt, eddy::fs::remove_dir(dir.file("empty"))) == std::errc::no_such_file_or_directory);
    CHECK(error_of_call(rt, eddy::fs::remove_dir_all(dir.file("empty"))) == std::errc::no_such_file_or_directory);
}
