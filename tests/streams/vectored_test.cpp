// tests/streams/vectored_test.cpp: vectored I/O, one system call or one SQE for several buffers:
//   - TcpStream::write_vectored sends three buffers in order; read_vectored fills three
//     buffers in order, and gives 0 at end of stream;
//   - io::writev / io::readv on a pipe and on a file (at its position, which advances);
//   - a bad descriptor: std::system_error with EBADF.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <string>
#include <system_error>

#include <eddy/io/pipe.hpp>
#include <eddy/io/read_write.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/tasks/task.hpp>

#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::test::run;

namespace {

iovec iov(std::string& s) { return iovec{s.data(), s.size()}; }

}  // namespace

TEST_CASE("TcpStream::write_vectored and read_vectored keep the order of the buffers") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
    run(rt, [&]() -> Task<void> {
        auto [client, server] = co_await eddy::test::connect_pair(listener);
        std::string a = "head:", b = "body", c = ":tail";
        const std::array<iovec, 3> out{iov(a), iov(b), iov(c)};
        std::size_t sent = 0;
        while (sent < 14) sent += co_await client.write_vectored(out);  // small: one call on loopback
        CHECK(sent == 14);
        client.shutdown();
        std::string x(4, '.'), y(4, '.'), z(8, '.');
        const std::array<iovec, 3> in{iov(x), iov(y), iov(z)};
        std::size_t got = 0;
        while (got < 14) {
            const std::size_t n = co_await server.read_vectored(in);
            REQUIRE(n > 0);
            got += n;
            if (got < 14) {  // unlikely on loopback: the rest is read plainly
                std::string rest = co_await eddy::test::read_to_end(server);
                CHECK((x + y + z).substr(0, got) + rest == "head:body:tail");
                co_return;
            }
        }
        CHECK(x + y + z.substr(0, 6) == "head:body:tail");
        CHECK(co_await server.read_vectored(in) == 0);
    }());
}

TEST_CASE("io::writev and io::readv on a pipe and on a file; EBADF") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::io::Pipe p = eddy::io::pipe();
    eddy::test::TempDir dir;
    const std::string path = dir.file("v");
    const int file = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    REQUIRE(file >= 0);
    run(rt, [&]() -> Task<void> {
        for (int fd : {p.write_end.get(), file}) {
            std::string a = "one ", b = "two ", c = "three";
            const std::array<iovec, 3> out{iov(a), iov(b), iov(c)};
            CHECK(co_await eddy::io::writev(fd, out) == 13);
        }
        REQUIRE(::lseek(file, 0, SEEK_SET) == 0);
        for (int fd : {p.read_end.get(), file}) {
            std::string x(6, '.'), y(7, '.');
            const std::array<iovec, 2> in{iov(x), iov(y)};
            CHECK(co_await eddy::io::readv(fd, in) == 13);
            CHECK(x + y == "one two three");
        }
        std::string x(4, '.');
        const std::array<iovec, 1> in{iov(x)};
        CHECK(co_await eddy::io::readv(file, in) == 0);  // the position moved to the end
        bool ebadf = false;
        try {
            co_await eddy::io::readv(-1, in);
        } catch (const std::system_error& e) {
            ebadf = e.code() == std::errc::bad_file_descriptor;
        }
        CHECK(ebadf);
    }());
    ::close(file);
}
