// tests/fs/fs_metadata_test.cpp: fs::metadata, fs::symlink_metadata, File::metadata:
//   - a file's type, size, permissions, link count, owner and modification time (within a
//     minute of now); a directory; a symlink followed and not followed;
//   - a missing path is ENOENT and the message names the path; a path through a file is
//     ENOTDIR.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <system_error>

#include <eddy/fs/file.hpp>
#include <eddy/fs/metadata.hpp>
#include <eddy/runtime/runtime.hpp>

#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::test::run;

TEST_CASE("metadata of a file, a directory and a symlink") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::test::TempDir dir;
    const std::string file = dir.file("f.txt");
    std::ofstream(file) << "twelve bytes";
    REQUIRE(::chmod(file.c_str(), 0640) == 0);
    REQUIRE(::symlink(file.c_str(), dir.file("link").c_str()) == 0);

    const auto m = run(rt, eddy::fs::metadata(file));
    CHECK(m.is_file());
    CHECK(m.size == 12);
    CHECK(m.permissions == 0640);
    CHECK(m.links == 1);
    CHECK(m.uid == ::getuid());
    CHECK(m.gid == ::getgid());
    const auto age = std::chrono::system_clock::now() - m.modified;
    CHECK(age < std::chrono::minutes(1));
    CHECK(age > -std::chrono::minutes(1));

    CHECK(run(rt, eddy::fs::metadata(dir.path().string())).is_dir());
    CHECK(run(rt, eddy::fs::metadata(dir.file("link"))).is_file());  // followed
    CHECK(run(rt, eddy::fs::symlink_metadata(dir.file("link"))).is_symlink());

    auto f = run(rt, eddy::fs::File::open(file));
    const auto fm = run(rt, f.metadata());
    CHECK(fm.is_file());
    CHECK(fm.size == 12);
}

TEST_CASE("metadata errors carry the errno and the path") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::test::TempDir dir;
    const std::string missing = dir.file("missing");
    try {
        run(rt, eddy::fs::metadata(missing));
        FAIL("no exception");
    } catch (const std::system_error& e) {
        CHECK(e.code() == std::errc::no_such_file_or_directory);
        CHECK(std::string(e.what()).find(missing) != std::string::npos);
    }
    std::ofstream(dir.file("plain")) << "x";
    try {
        run(rt, eddy::fs::metadata(dir.file("plain") + "/below"));
        FAIL("no exception");
    } catch (const std::system_error& e) {
        CHECK(e.code() == std::errc::not_a_directory);
    }
}
