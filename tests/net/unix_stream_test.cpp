// tests/net/unix_stream_test.cpp: net::UnixStream, net::UnixListener and net::UnixAddr:
//   - a path and an abstract name: bytes both ways, end of stream, the addresses each side
//     sees, peer credentials (our own pid, uid, gid), many connections accepted by a few
//     acceptors; UnixStream::pair(); a BufReader on a UnixStream;
//   - connect to a missing path (ENOENT) and to a stale socket file (ECONNREFUSED);
//   - bind over a stale socket file: EADDRINUSE saying "stale" and the file left alone, then
//     {.remove_stale = true} replaces it; over a live listener's path: EADDRINUSE "live", the
//     live listener still accepting; over a regular file: EADDRINUSE "not a socket", the file
//     untouched;
//   - a path or name too long, empty, or holding a NUL: std::invalid_argument;
//   - an accept and a read waiting are cancelled by their stop_token.
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <fstream>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <eddy/io/buf_reader.hpp>
#include <eddy/net/unix_listener.hpp>
#include <eddy/net/unix_stream.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::net::UnixAddr;
using eddy::net::UnixListener;
using eddy::net::UnixStream;
using eddy::test::run;

namespace {

/// One connection: the client sends `request` and closes its write side; the server answers
/// with what it read, upper-cased; gives what the client read back.
Task<std::string> round_trip(UnixListener& listener, const UnixAddr& addr, std::string request) {
    auto server = eddy::spawn([](UnixListener& l) -> Task<void> {
        UnixStream s = co_await l.accept();
        std::string got = co_await eddy::test::read_to_end(s);
        for (char& c : got) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        co_await s.write_all(got);
    }(listener));
    UnixStream c = co_await UnixStream::connect(addr);
    co_await c.write_all(request);
    c.shutdown();
    std::string answer = co_await eddy::test::read_to_end(c);
    co_await server;
    co_return answer;
}

std::string error_text(auto&& f) {
    try {
        f();
    } catch (const std::system_error& e) {
        CHECK(e.code() == std::errc::address_in_use);
        return e.what();
    }
    FAIL("no exception");
    return {};
}

}  // namespace

TEST_CASE("a path and an abstract name carry bytes both ways") {
    Runtime rt(RuntimeConfig{.workers = 2});
    eddy::test::TempDir dir;
    const std::string abstract_name = "eddy-test-" + std::to_string(::getpid());
    for (const UnixAddr& addr : {UnixAddr::path(dir.file("s.sock")), UnixAddr::abstract(abstract_name)}) {
        CAPTURE(addr.to_string());
        auto listener = UnixListener::bind(addr);
        CHECK(listener.local_address() == addr);
        CHECK(run(rt, round_trip(listener, addr, "hello over unix")) == "HELLO OVER UNIX");
    }
    CHECK(UnixAddr::abstract(abstract_name).to_string() == "@" + abstract_name);
    CHECK(UnixAddr::path(dir.file("s.sock")).is_path());
    CHECK(UnixAddr().is_unnamed());
}

TEST_CASE("peer credentials, addresses, pair(), and a BufReader on a UnixStream") {
    Runtime rt(RuntimeConfig{.workers = 2});
    eddy::test::TempDir dir;
    const UnixAddr addr = UnixAddr::path(dir.file("c.sock"));
    auto listener = UnixListener::bind(addr);
    run(rt, [&]() -> Task<void> {
        auto accepted = eddy::spawn(listener.accept_with_address());
        UnixStream c = co_await UnixStream::connect(addr);
        auto [s, from] = co_await accepted;
        CHECK(from.is_unnamed());  // the client never bound
        CHECK(c.peer_address() == addr);
        CHECK(s.local_address() == addr);
        const eddy::net::Credentials who = s.peer_credentials();
        CHECK(who.pid == ::getpid());
        CHECK(who.uid == ::getuid());
        CHECK(who.gid == ::getgid());
        co_await c.write_all("line one\nline two\n");
        c.close();
        eddy::io::BufReader in(s);
        std::string line;
        CHECK(co_await in.read_line(line));
        CHECK(line == "line one");
        CHECK(co_await in.read_line(line));
        CHECK(line == "line two");
        CHECK_FALSE(co_await in.read_line(line));
    }());
    auto pair = UnixStream::pair();  // not a structured binding: clang 14 cannot capture one
    auto& a = pair.first;
    auto& b = pair.second;
    CHECK(run(rt, [](UnixStream& end_a, UnixStream& end_b) -> Task<std::string> {
              co_await end_a.write_all("paired");
              end_a.close();
              co_return co_await eddy::test::read_to_end(end_b);
          }(a, b)) == "paired");
}

TEST_CASE("100 connections accepted by four acceptors, each once") {
    Runtime rt(RuntimeConfig{.workers = 2});
    const UnixAddr addr = UnixAddr::abstract("eddy-test-many-" + std::to_string(::getpid()));
    auto listener = UnixListener::bind(addr);
    std::atomic<int> served{0};
    run(rt, [&]() -> Task<void> {
        std::stop_source stop;
        std::vector<Task<void>> acceptors;
        for (int i = 0; i < 4; ++i)
            acceptors.push_back([](UnixListener& l, std::stop_token t, std::atomic<int>& n) -> Task<void> {
                try {
                    for (;;) {
                        UnixStream s = co_await l.accept(t);
                        co_await s.write_all("x");
                        n.fetch_add(1);
                    }
                } catch (const eddy::OperationCancelled&) {
                }
            }(listener, stop.get_token(), served));
        auto all = eddy::spawn(eddy::when_all(std::move(acceptors)));
        for (int i = 0; i < 100; ++i) {
            UnixStream c = co_await UnixStream::connect(addr);
            CHECK(co_await eddy::test::read_to_end(c) == "x");
        }
        stop.request_stop();
        co_await all;
    }());
    CHECK(served.load() == 100);
}

TEST_CASE("connect: a missing path is ENOENT, a stale socket file ECONNREFUSED") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::test::TempDir dir;
    const UnixAddr missing = UnixAddr::path(dir.file("missing.sock"));
    const UnixAddr stale = UnixAddr::path(dir.file("stale.sock"));
    { auto l = UnixListener::bind(stale); }  // closed: the file stays, nobody listens
    for (auto [addr, code] :
         {std::pair{missing, std::errc::no_such_file_or_directory}, std::pair{stale, std::errc::connection_refused}}) {
        try {
            run(rt, UnixStream::connect(addr));
            FAIL("no exception");
        } catch (const std::system_error& e) {
            CHECK(e.code() == code);
        }
    }
}

TEST_CASE("bind over what is at the path: stale, live, not a socket") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::test::TempDir dir;
    const UnixAddr stale = UnixAddr::path(dir.file("stale.sock"));
    { auto l = UnixListener::bind(stale); }
    const std::string text = error_text([&] { UnixListener::bind(stale); });
    CHECK(text.find("stale socket nobody listens on") != std::string::npos);
    struct stat st {};
    CHECK(::lstat(stale.name().c_str(), &st) == 0);  // left alone
    auto replaced = UnixListener::bind(stale, {.remove_stale = true});
    CHECK(run(rt, round_trip(replaced, stale, "again")) == "AGAIN");

    // The live one: the error says so, and it still accepts (first the probe's connection,
    // which closed at once).
    const std::string live = error_text([&] { UnixListener::bind(stale, {.remove_stale = true}); });
    CHECK(live.find("a live listener is bound there") != std::string::npos);
    CHECK(run(rt, [&]() -> Task<std::string> {
              UnixStream probe = co_await replaced.accept();
              co_return co_await eddy::test::read_to_end(probe);
          }()) == "");
    CHECK(run(rt, round_trip(replaced, stale, "still")) == "STILL");

    const std::string file = dir.file("plain.txt");
    std::ofstream(file) << "keep me";
    const std::string not_socket =
        error_text([&] { UnixListener::bind(UnixAddr::path(file), {.remove_stale = true}); });
    CHECK(not_socket.find("not a socket") != std::string::npos);
    std::ifstream in(file);
    std::string kept;
    std::getline(in, kept);
    CHECK(kept == "keep me");
}

TEST_CASE("addresses too long, empty or with a NUL byte are invalid_argument") {
    CHECK_THROWS_AS(UnixAddr::path(std::string(108, 'a')), std::invalid_argument);
    CHECK_NOTHROW(UnixAddr::path(std::string(107, 'a')));
    CHECK_THROWS_AS(UnixAddr::abstract(std::string(108, 'a')), std::invalid_argument);
    CHECK_THROWS_AS(UnixAddr::path(""), std::invalid_argument);
    CHECK_THROWS_AS(UnixAddr::path(std::string("a\0b", 3)), std::invalid_argument);
}

TEST_CASE("a waiting accept and a waiting read are cancelled by their tokens") {
    Runtime rt(RuntimeConfig{.workers = 2});
    const UnixAddr addr = UnixAddr::abstract("eddy-test-cancel-" + std::to_string(::getpid()));
    auto listener = UnixListener::bind(addr);
    auto pair = UnixStream::pair();  // not a structured binding: clang 14 cannot capture one
    auto& a = pair.first;
    std::stop_source stop;
    std::thread canceller([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        stop.request_stop();
    });
    const int cancelled = run(rt, [&]() -> Task<int> {
        auto acc = [](UnixListener& l, std::stop_token t) -> Task<int> {
            try {
                co_await l.accept(t);
            } catch (const eddy::OperationCancelled&) {
                co_return 1;
            }
            co_return 0;
        };
        auto rd = [](UnixStream& s, std::stop_token t) -> Task<int> {
            std::array<std::byte, 8> buf;
            try {
                co_await s.read(buf, t);
            } catch (const eddy::OperationCancelled&) {
                co_return 1;
            }
            co_return 0;
        };
        auto [x, y] = co_await eddy::when_all(acc(listener, stop.get_token()), rd(a, stop.get_token()));
        co_return x + y;
    }());
    canceller.join();
    CHECK(cancelled == 2);
}
