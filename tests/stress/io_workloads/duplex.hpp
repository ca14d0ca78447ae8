// tests/stress/io_workloads/duplex.hpp: the byte streams the io_stress workloads run on:
// a pipe pair (a third of the ends non-blocking) or a loopback TCP connection (half with tiny
// send buffers), both behind one Duplex type.
#pragma once

#include <eddy/io/file_descriptor.hpp>
#include <eddy/io/pipe.hpp>
#include <eddy/io/read_write.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/net/tcp_stream.hpp>
#include <eddy/tasks/task.hpp>

#include "stress/io_workloads/bookkeeping.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/socket.h>

#include <cstddef>
#include <optional>
#include <span>
#include <stop_token>
#include <utility>

namespace eddy::test::io_stress {

// ---- Byte streams: a pipe pair or a TCP socket --------------------------------------------

/// One side of a bidirectional byte stream: two pipe ends, or a connected TCP socket.
struct Duplex {
    eddy::io::FileDescriptor rd;  // pipes
    eddy::io::FileDescriptor wr;
    std::optional<eddy::net::TcpStream> sock;  // or a socket

    // Tasks: a socket's awaiter (readiness-based) and a descriptor's (one io_uring
    // operation) are different types.
    Task<std::size_t> read(std::span<std::byte> b, std::stop_token t = {}) {
        if (sock) co_return co_await sock->read(b, std::move(t));
        co_return co_await eddy::io::read(rd.get(), b, std::move(t));
    }
    Task<std::size_t> write(std::span<const std::byte> b, std::stop_token t = {}) {
        if (sock) co_return co_await sock->write(b, std::move(t));
        co_return co_await eddy::io::write(wr.get(), b, std::move(t));
    }
    /// The peer reads end of stream once it has everything written before.
    void close_write() {
        if (sock) sock->shutdown(eddy::net::TcpStream::Shutdown::kWrite);
        else wr.close();
    }
};

/// Two connected Duplexes over two pipes; either or both directions non-blocking (a
/// non-blocking descriptor that is not ready takes the reactor's poll-then-retry path).
inline std::pair<Duplex, Duplex> pipe_duplex(Rng& r) {
    auto ab = eddy::io::pipe();
    auto ba = eddy::io::pipe();
    for (int fd : {ab.read_end.get(), ab.write_end.get(), ba.read_end.get(), ba.write_end.get()})
        if (r.one_in(3)) REQUIRE(::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK) == 0);
    Duplex a, b;
    a.rd = std::move(ba.read_end);
    a.wr = std::move(ab.write_end);
    b.rd = std::move(ab.read_end);
    b.wr = std::move(ba.write_end);
    return {std::move(a), std::move(b)};
}

/// A TCP connection over loopback made with plain blocking calls from this thread. Half get
/// tiny send buffers, so that writes block (and go to the reactor) often.
inline std::pair<Duplex, Duplex> tcp_duplex(eddy::net::TcpListener& listener, Rng& r) {
    const auto addr = listener.local_address();
    eddy::io::FileDescriptor c(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
    REQUIRE(c);
    REQUIRE(::connect(c.get(), addr.native(), addr.native_size()) == 0);
    eddy::io::FileDescriptor s(::accept4(listener.native_handle(), nullptr, nullptr, SOCK_CLOEXEC));
    REQUIRE(s);
    if (r.one_in(2)) {
        // Only the send buffers: tiny receive windows make loopback TCP crawl (delayed ACKs).
        const int small = 4096;
        for (int fd : {c.get(), s.get()}) REQUIRE(::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small) == 0);
    }
    Duplex a, b;
    a.sock.emplace(std::move(c));
    b.sock.emplace(std::move(s));
    a.sock->set_nodelay(true);
    b.sock->set_nodelay(true);
    return {std::move(a), std::move(b)};
}

}  // namespace eddy::test::io_stress
