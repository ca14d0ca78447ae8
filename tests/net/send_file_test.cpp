// tests/net/send_file_test.cpp: what a server on TcpStream uses beside read and write.
// send_file (sendfile(2) on the readiness path): a range of a file arrives byte for byte
// through small socket buffers (so the send waits for room), the count is short only when
// the file ends first, the file position does not move, a peer that went away is a
// std::system_error (EPIPE or ECONNRESET) and no SIGPIPE, and a descriptor sendfile cannot
// read is EINVAL; offsets past 4 GiB work, a file that shrinks mid-send gives what went out,
// a stopped token ends a waiting send, and a closed stream is EBADF. readable(): waits for
// bytes without taking them, gives 0 at the end of the stream, ends with OperationCancelled
// on its token, and costs no reactor operation.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>
#include <tuple>
#include <array>
#include <stop_token>
#include <vector>

#include <eddy/fs/file.hpp>
#include <eddy/io/file_descriptor.hpp>
#include <eddy/net/socket_addr.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/net/tcp_stream.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::fs::File;
using eddy::net::SocketAddr;
using eddy::net::TcpListener;
using eddy::net::TcpStream;
using eddy::test::Connection;
using eddy::test::connect_pair;
using eddy::test::run;

namespace {

/// A temporary file holding `content`, removed at once (the descriptor keeps it).
File temp_file(const std::vector<std::byte>& content) {
    char name[] = "/tmp/eddy-send-file-XXXXXX";
    const int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    ::unlink(name);
    REQUIRE(::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()));
    return File(eddy::io::FileDescriptor(fd));
}

Task<std::vector<std::byte>> read_to_end(TcpStream& s) {
    std::vector<std::byte> out, buf(16 * 1024);
    for (;;) {
        const std::size_t n = co_await s.read(buf);
        if (n == 0) co_return out;
        out.insert(out.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
    }
}

struct Sent {
    std::size_t whole = 0;  // what send_file gave for the range
    std::size_t past_end = 0;
    std::vector<std::byte> received;
};

Task<Sent> send_range(TcpStream& s, const File& f, std::uint64_t offset, std::size_t count, std::size_t size) {
    Sent r;
    r.whole = co_await s.send_file(f, offset, count);
    r.past_end = co_await s.send_file(f, size - 10, 100);  // only 10 bytes are left
    s.shutdown(TcpStream::Shutdown::kWrite);
    co_return r;
}

Task<Sent> transfer(TcpListener& listener, const File& f, std::uint64_t offset, std::size_t count, std::size_t size) {
    Connection c = co_await connect_pair(listener);
    // Small buffers: the range cannot be in flight at once, so send_file waits for room.
    eddy::test::set_int_sockopt(c.client.native_handle(), SOL_SOCKET, SO_SNDBUF, 64 * 1024);
    auto [sent, received] =
        co_await eddy::when_all(send_range(c.client, f, offset, count, size), read_to_end(c.server));
    sent.received = std::move(received);
    co_return sent;
}

}  // namespace

TEST_CASE("send_file sends a file's range byte for byte, waiting for room, and is short only at the end") {
    constexpr std::size_t kSize = std::size_t{3} << 20;
    const std::vector<std::byte> content = eddy::test::pattern(kSize);
    const File f = temp_file(content);
    const auto position = ::lseek(f.native_handle(), 0, SEEK_CUR);
    for (const std::size_t workers : {std::size_t{1}, std::size_t{2}}) {
        CAPTURE(workers);
        auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
        eddy::test::set_int_sockopt(listener.native_handle(), SOL_SOCKET, SO_RCVBUF, 64 * 1024);
        Runtime rt(RuntimeConfig{.workers = workers});
        const std::uint64_t offset = 12345;
        const std::size_t count = kSize - 2 * offset;
        const Sent r = run(rt, transfer(listener, f, offset, count, kSize));
        CHECK(r.whole == count);
        CHECK(r.past_end == 10);
        REQUIRE(r.received.size() == count + 10);
        CHECK(std::equal(r.received.begin(), r.received.begin() + static_cast<std::ptrdiff_t>(count),
                         content.begin() + static_cast<std::ptrdiff_t>(offset)));
        CHECK(std::equal(r.received.end() - 10, r.received.end(), content.end() - 10));
    }
    CHECK(::lseek(f.native_handle(), 0, SEEK_CUR) == position);  // the file position did not move
}

namespace {

/// Sends `f` in a loop to a peer that closes at once; gives the error code it ended with.
Task<std::error_code> send_to_gone_peer(TcpListener& listener, const File& f, std::size_t size) {
    Connection c = co_await connect_pair(listener);
    c.server.close();
    try {
        for (int i = 0; i < 1000; ++i) co_await c.client.send_file(f, 0, size);
    } catch (const std::system_error& e) {
        co_return e.code();
    }
    co_return std::error_code{};
}

Task<std::error_code> send_from(TcpListener& listener, const File& f) {
    Connection c = co_await connect_pair(listener);
    try {
        co_await c.client.send_file(f, 0, 10);
    } catch (const std::system_error& e) {
        co_return e.code();
    }
    co_return std::error_code{};
}

}  // namespace

TEST_CASE("send_file to a peer that went away is EPIPE or ECONNRESET, without SIGPIPE") {
    // SIGPIPE at its default action would end this program: the workers block it.
    constexpr std::size_t kSize = 256 * 1024;
    const File f = temp_file(eddy::test::pattern(kSize));
    auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    Runtime rt(RuntimeConfig{.workers = 1});
    const std::error_code ec = run(rt, send_to_gone_peer(listener, f, kSize));
    CHECK((ec == std::errc::broken_pipe || ec == std::errc::connection_reset));
}

TEST_CASE("send_file from a descriptor sendfile cannot read is EINVAL") {
    const int dir = ::open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    REQUIRE(dir >= 0);
    const File f{eddy::io::FileDescriptor(dir)};
    auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    Runtime rt(RuntimeConfig{.workers = 1});
    const std::error_code ec = run(rt, send_from(listener, f));
    CHECK(ec == std::errc::invalid_argument);
}

namespace {

struct Readiness {
    std::size_t waited = 9;  // readable() while the peer had not written yet
    std::string read_after;  // what a read took after it: everything
    bool cancelled = false;  // readable() on a quiet socket, its token stopped meanwhile
    std::size_t at_end = 9;  // readable() after the peer's FIN
    // readable() woken by the last bytes and the FIN in one report: 1, then the bytes, then 0.
    std::size_t last_waited = 9;
    std::string last_read;
    std::size_t last_at_end = 9;
    std::uint64_t ops_before = 0, ops_after = 0;
};

Task<void> write_later(TcpStream& s, std::string text) {
    for (int i = 0; i < 3; ++i) co_await eddy::yield_now();
    co_await s.write_all(text);
}

Task<std::size_t> wait_readable(TcpStream& s) { co_return co_await s.readable(); }

Task<void> write_then_close_later(TcpStream& s, std::string text) {
    co_await write_later(s, std::move(text));
    s.shutdown(TcpStream::Shutdown::kWrite);
}

Task<void> stop_later(std::stop_source& stop) {
    for (int i = 0; i < 3; ++i) co_await eddy::yield_now();
    stop.request_stop();
}

Task<bool> readable_until_stopped(TcpStream& s, std::stop_token token) {
    try {
        co_await s.readable(std::move(token));
    } catch (const eddy::OperationCancelled&) {
        co_return true;
    }
    co_return false;
}

Task<Readiness> readiness(Runtime& rt, TcpListener& listener) {
    Connection c = co_await connect_pair(listener);
    Readiness r;
    r.ops_before = rt.metrics().reactor.operations;
    r.waited = std::get<0>(co_await eddy::when_all(wait_readable(c.server), write_later(c.client, "ab")));
    std::array<std::byte, 8> buf;
    const std::size_t n = co_await c.server.read(buf);
    r.read_after.assign(reinterpret_cast<const char*>(buf.data()), n);
    // Twenty more waits that find the bytes there or wait for them: no operation each.
    for (int i = 0; i < 20; ++i) {
        co_await eddy::when_all(wait_readable(c.server), write_later(c.client, "x"));
        (void)co_await c.server.read(buf);
    }
    r.ops_after = rt.metrics().reactor.operations;
    std::stop_source stop;
    r.cancelled =
        std::get<0>(co_await eddy::when_all(readable_until_stopped(c.server, stop.get_token()), stop_later(stop)));
    c.client.shutdown(TcpStream::Shutdown::kWrite);
    r.at_end = co_await c.server.readable();

    Connection last = co_await connect_pair(listener);
    r.last_waited =
        std::get<0>(co_await eddy::when_all(wait_readable(last.server), write_then_close_later(last.client, "end")));
    const std::size_t got = co_await last.server.read(buf);
    r.last_read.assign(reinterpret_cast<const char*>(buf.data()), got);
    r.last_at_end = co_await last.server.readable();
    co_return r;
}

}  // namespace

TEST_CASE("readable() waits for bytes without taking them, gives 0 at the end, and stops on its token") {
    for (const std::size_t workers : {std::size_t{1}, std::size_t{2}}) {
        CAPTURE(workers);
        auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
        Runtime rt(RuntimeConfig{.workers = workers});
        const Readiness r = run(rt, readiness(rt, listener));
        CHECK(r.waited == 1);
        CHECK(r.read_after == "ab");
        CHECK(r.ops_after == r.ops_before);  // the socket's own poll: no reactor operation per wait
        CHECK(r.cancelled);
        CHECK(r.at_end == 0);
        CHECK(r.last_waited == 1);
        CHECK(r.last_read == "end");
        CHECK(r.last_at_end == 0);
    }
}

namespace {

struct Received {
    std::size_t sent = 0;   // what send_file gave
    std::size_t total = 0;  // what the peer read
    std::vector<std::byte> tail;
};

Task<std::size_t> send_then_close(TcpStream& s, const File& file, std::uint64_t offset, std::size_t count) {
    const std::size_t n = co_await s.send_file(file, offset, count);
    s.shutdown(TcpStream::Shutdown::kWrite);
    co_return n;
}

/// Reads to the end, keeping the last `keep` bytes; once `shrink_at` bytes arrived, truncates
/// `shrink_fd` (if not -1) to `shrink_to` bytes.
Task<Received> read_keeping_tail(TcpStream& s, std::size_t keep, int shrink_fd, std::size_t shrink_at,
                                 off_t shrink_to) {
    Received r;
    std::vector<std::byte> buf(256 * 1024);
    for (;;) {
        const std::size_t n = co_await s.read(buf);
        if (n == 0) co_return r;
        r.total += n;
        if (shrink_fd >= 0 && r.total >= shrink_at) {
            REQUIRE(::ftruncate(shrink_fd, shrink_to) == 0);
            shrink_fd = -1;
        }
        r.tail.insert(r.tail.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
        if (r.tail.size() > keep) r.tail.erase(r.tail.begin(), r.tail.end() - static_cast<std::ptrdiff_t>(keep));
    }
}

Task<Received> send_through(TcpListener& listener, const File& f, std::uint64_t offset, std::size_t count,
                            std::size_t keep, int shrink_fd = -1, std::size_t shrink_at = 0, off_t shrink_to = 0) {
    Connection c = co_await connect_pair(listener);
    eddy::test::set_int_sockopt(c.client.native_handle(), SOL_SOCKET, SO_SNDBUF, 64 * 1024);
    auto [n, got] = co_await eddy::when_all(send_then_close(c.client, f, offset, count),
                                            read_keeping_tail(c.server, keep, shrink_fd, shrink_at, shrink_to));
    got.sent = n;
    co_return got;
}

}  // namespace

TEST_CASE("send_file reads past 4 GiB, and a file that shrinks mid-send gives what was sent") {
    auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    Runtime rt(RuntimeConfig{.workers = 2});
    SUBCASE("an offset past 4 GiB in a sparse file: the bytes there, short by what is past the end") {
        constexpr std::uint64_t kFar = (std::uint64_t{4} << 30) + 12345;
        constexpr std::size_t kPiece = 100 * 1024;
        const std::vector<std::byte> piece = eddy::test::pattern(kPiece);
        File f = temp_file({});
        REQUIRE(::pwrite(f.native_handle(), piece.data(), kPiece, static_cast<off_t>(kFar)) ==
                static_cast<ssize_t>(kPiece));
        const Received r = run(rt, send_through(listener, f, kFar, kPiece + 50, kPiece));
        CHECK(r.sent == kPiece);
        CHECK(r.total == kPiece);
        CHECK(r.tail == piece);
    }
    SUBCASE("cut to 1 MiB by the reader after 256 KiB of 3 MiB: 1 MiB sent, the count says so") {
        // Small buffers on both sides keep the sender well short of 1 MiB when the cut comes.
        eddy::test::set_int_sockopt(listener.native_handle(), SOL_SOCKET, SO_RCVBUF, 64 * 1024);
        constexpr std::size_t kSize = std::size_t{3} << 20;
        constexpr std::size_t kCut = std::size_t{1} << 20;
        const std::vector<std::byte> content = eddy::test::pattern(kSize);
        File f = temp_file(content);
        const Received r = run(rt, send_through(listener, f, 0, kSize, 16, f.native_handle(), 256 * 1024, kCut));
        CHECK(r.sent == kCut);
        CHECK(r.total == kCut);
        CHECK(r.tail == std::vector<std::byte>(content.begin() + kCut - 16, content.begin() + kCut));
    }
}

namespace {

Task<std::string> stopped_then_closed(TcpListener& listener, const File& f, std::size_t size) {
    Connection c = co_await connect_pair(listener);
    eddy::test::set_int_sockopt(c.client.native_handle(), SOL_SOCKET, SO_SNDBUF, 64 * 1024);
    std::stop_source stop;
    // Nobody reads: the send waits for room until its token stops it.
    auto sender = [](TcpStream& s, const File& file, std::size_t n, std::stop_token t) -> Task<std::string> {
        try {
            co_await s.send_file(file, 0, n, std::move(t));
        } catch (const eddy::OperationCancelled&) {
            co_return "cancelled";
        }
        co_return "sent";
    };
    auto stopper = [](std::stop_source& st) -> Task<void> {
        for (int i = 0; i < 5; ++i) co_await eddy::yield_now();
        st.request_stop();
    };
    auto [r, done] = co_await eddy::when_all(sender(c.client, f, size, stop.get_token()), stopper(stop));
    (void)done;
    c.client.close();
    std::string closed = "no error";
    try {
        (void)co_await c.client.send_file(f, 0, 1);
    } catch (const std::system_error& e) {
        closed = e.code() == std::errc::bad_file_descriptor ? "EBADF" : e.what();
    }
    co_return r + "/" + closed;
}

}  // namespace

TEST_CASE("send_file stopped by its token while it waits for room; on a closed stream, EBADF") {
    constexpr std::size_t kSize = std::size_t{8} << 20;
    const File f = temp_file(eddy::test::pattern(kSize));
    auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    eddy::test::set_int_sockopt(listener.native_handle(), SOL_SOCKET, SO_RCVBUF, 64 * 1024);
    Runtime rt(RuntimeConfig{.workers = 2});
    CHECK(run(rt, stopped_then_closed(listener, f, kSize)) == "cancelled/EBADF");
}
