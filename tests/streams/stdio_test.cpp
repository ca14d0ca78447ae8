// tests/streams/stdio_test.cpp: io::stdin/stdout/stderr as streams: StdStream over a pipe reads
// and writes like the others (a BufReader reads its lines); stdout() and stderr() are
// StdStreams on descriptors 1 and 2 (a child process with its stdout on a pipe gets what the
// parent task wrote through io::stdout()); writing to a pipe whose reader is gone is EPIPE,
// not a SIGPIPE.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <system_error>

#include <eddy/io/buf_reader.hpp>
#include <eddy/io/pipe.hpp>
#include <eddy/io/stdio.hpp>
#include <eddy/io/stream_ops.hpp>
#include <eddy/runtime/runtime.hpp>

#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::test::run;

TEST_CASE("StdStream over a pipe: lines in, bytes out, EPIPE without SIGPIPE") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::io::Pipe p = eddy::io::pipe();
    eddy::io::StdStream out(p.write_end.get());
    eddy::io::StdStream in(p.read_end.get());
    const auto lines = run(rt, [&]() -> Task<std::vector<std::string>> {
        co_await eddy::io::write_all(out, eddy::test::bytes("first\nsecond\n"));
        p.write_end.close();
        eddy::io::BufReader reader(in);
        std::vector<std::string> got;
        std::string line;
        while (co_await reader.read_line(line)) got.push_back(line);
        co_return got;
    }());
    CHECK(lines == std::vector<std::string>{"first", "second"});

    eddy::io::Pipe q = eddy::io::pipe();
    q.read_end.close();
    eddy::io::StdStream broken(q.write_end.get());
    try {
        run(rt, eddy::io::write_all(broken, eddy::test::bytes("x")));
        FAIL("no exception");
    } catch (const std::system_error& e) {
        CHECK(e.code() == std::errc::broken_pipe);
    }
    CHECK(eddy::io::stdin().native_handle() == 0);
    CHECK(eddy::io::stdout().native_handle() == 1);
    CHECK(eddy::io::stderr().native_handle() == 2);
}

TEST_CASE("io::stdout() writes to descriptor 1 (a child's, on a pipe)") {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    std::fflush(nullptr);  // what our stdio buffers hold must not reach the child's stdout
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::dup2(fds[1], STDOUT_FILENO);
        ::close(fds[0]);
        ::close(fds[1]);
        int status = 0;
        try {
            Runtime rt(RuntimeConfig{.workers = 1});
            rt.block_on([]() -> Task<void> {
                co_await eddy::io::write_all(eddy::io::stdout(), eddy::test::bytes("to stdout"));
            }());
        } catch (...) {
            status = 1;
        }
        ::_exit(status);
    }
    ::close(fds[1]);
    std::string got;
    char buf[64];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(got == "to stdout");
}
