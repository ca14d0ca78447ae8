// tests/stress/io_workloads/echo.hpp: the echo workload of io_stress (case 1, and traffic
// beside the timers and the shutdown): pingers that send messages of mixed sizes and check
// every echoed byte, echoers with buffers from a few bytes to 64 KiB, over pipes and over TCP
// connections accepted and made through the reactor.
#pragma once

#include <eddy/net/socket_addr.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/net/tcp_stream.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/tasks/task.hpp>

#include "stress/io_workloads/bookkeeping.hpp"
#include "stress/io_workloads/duplex.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace eddy::test::io_stress {

// ---- Case 1: ping-pong and echo ------------------------------------------------------------

/// A stream's plan: its message sizes and its echoer's buffer. One stream in four echoes
/// through a buffer of a few bytes (many small operations); its messages are small, too.
struct EchoPlan {
    std::vector<std::size_t> sizes;
    std::size_t echo_buffer;
};

inline EchoPlan plan_stream(Rng& r, int messages) {
    EchoPlan p;
    const bool tiny = r.one_in(4);
    for (int i = 0; i < messages; ++i) p.sizes.push_back(tiny ? 1 + r.below(256) : message_size(r));
    p.echo_buffer = tiny ? 1 + r.below(16) : 256 + r.below(64 * 1024);
    return p;
}

/// Writes bytes [pos, pos + n) of `stream` in random chunks (each write may be short too).
inline Task<void> send_part(Ctx& ctx, Duplex& d, std::uint64_t stream, std::uint64_t pos, std::size_t n, Rng r) {
    std::vector<std::byte> chunk;
    while (n > 0) {
        const std::size_t len = std::min(n, message_size(r));
        chunk.resize(len);
        fill_stream(chunk, stream, pos);
        std::span<const std::byte> left(chunk);
        while (!left.empty()) {
            const std::size_t w = co_await d.write(left);
            if (w == 0 || w > left.size()) {
                ctx.problems.add("stream " + std::to_string(stream) + ": write returned " + std::to_string(w));
                co_return;
            }
            left = left.subspan(w);
            ctx.bytes_sent.fetch_add(static_cast<long>(w));
        }
        pos += len;
        n -= len;
    }
}

/// Reads exactly n bytes with random buffer sizes, checking each against the stream.
inline Task<void> receive_part(Ctx& ctx, Duplex& d, std::uint64_t stream, std::uint64_t pos, std::size_t n, Rng r) {
    std::vector<std::byte> buf;
    while (n > 0) {
        buf.resize(std::min(n, message_size(r)));
        const std::size_t got = co_await d.read(buf);
        if (got == 0 || got > buf.size()) {
            ctx.problems.add("stream " + std::to_string(stream) + ": read returned " + std::to_string(got) + " with " +
                             std::to_string(n) + " bytes outstanding at offset " + std::to_string(pos));
            co_return;
        }
        if (!matches_stream(std::span(buf).first(got), stream, pos)) {
            ctx.problems.add("stream " + std::to_string(stream) + ": wrong bytes at offset " + std::to_string(pos));
            co_return;
        }
        ctx.bytes_checked.fetch_add(static_cast<long>(got));
        pos += got;
        n -= got;
    }
}

/// Sends each message and reads its echo back before the next one (both halves at once:
/// a message larger than the pipe or socket buffers needs the reader running).
inline Task<void> pinger(Ctx& ctx, Counted, Duplex d, std::uint64_t stream, std::vector<std::size_t> sizes, Rng r) {
    try {
        std::uint64_t pos = 0;
        for (std::size_t size : sizes) {
            co_await eddy::when_all(send_part(ctx, d, stream, pos, size, Rng{r.next()}),
                                    receive_part(ctx, d, stream, pos, size, Rng{r.next()}));
            pos += size;
            ctx.messages.fetch_add(1);
            ctx.progress.fetch_add(1);
        }
        d.close_write();
        // The echo side closes after its end of stream: nothing more may arrive.
        std::array<std::byte, 64> extra;
        const std::size_t n = co_await d.read(extra);
        if (n != 0) ctx.problems.add("stream " + std::to_string(stream) + ": " + std::to_string(n) + " extra bytes");
        ctx.tasks_done.fetch_add(1);
    } catch (const std::exception& e) {
        ctx.failed("pinger " + std::to_string(stream), e);
    }
}

/// Echoes what it reads until end of stream, then closes its writing side. Buffer size 0:
/// read it from the stream's first byte (0 there: 32 KiB).
inline Task<void> echoer(Ctx& ctx, Counted, Duplex d, std::size_t bufsize) {
    try {
        if (bufsize == 0) {
            std::byte header{};
            if (co_await d.read(std::span(&header, 1)) != 1) throw std::runtime_error("no header");
            bufsize = header == std::byte{0} ? 32 * 1024 : std::to_integer<std::size_t>(header);
        }
        std::vector<std::byte> buf(bufsize);
        for (;;) {
            const std::size_t n = co_await d.read(buf);
            if (n == 0) break;
            std::span<const std::byte> left = std::span(buf).first(n);
            while (!left.empty()) left = left.subspan(co_await d.write(left));
            ctx.bytes_echoed.fetch_add(static_cast<long>(n));
        }
        d.close_write();
        ctx.tasks_done.fetch_add(1);
    } catch (const std::exception& e) {
        ctx.failed("echoer", e);
    }
}

/// Accepts `n` connections through the reactor and spawns an echoer for each; the echoer
/// learns its buffer size from the connection's first byte (see tcp_client).
inline Task<void> acceptor(Ctx& ctx, Counted, eddy::net::TcpListener& listener, int n) {
    try {
        for (int i = 0; i < n; ++i) {
            eddy::net::TcpStream s = co_await listener.accept();
            s.set_nodelay(true);
            Duplex d;
            d.sock.emplace(std::move(s));
            eddy::spawn(echoer(ctx, ctx.life(), std::move(d), 0)).detach();
        }
        ctx.tasks_done.fetch_add(1);
    } catch (const std::exception& e) {
        ctx.failed("acceptor", e);
    }
}

/// Connects through the reactor, sends the echoer's buffer size (one byte, 0: 32 KiB),
/// then runs a pinger on the connection.
inline Task<void> tcp_client(Ctx& ctx, Counted, eddy::net::SocketAddr addr, std::uint64_t stream, EchoPlan plan,
                             Rng r) {
    try {
        eddy::net::TcpStream s = co_await eddy::net::TcpStream::connect(addr);
        s.set_nodelay(true);  // small echoes would wait for delayed ACKs (Nagle) otherwise
        const auto header = static_cast<std::byte>(plan.echo_buffer < 256 ? plan.echo_buffer : 0);
        co_await s.write_all(std::span(&header, 1));
        Duplex d;
        d.sock.emplace(std::move(s));
        co_await pinger(ctx, ctx.life(), std::move(d), stream, std::move(plan.sizes), Rng{r.next()});
        ctx.tasks_done.fetch_add(1);
    } catch (const std::exception& e) {
        ctx.failed("tcp_client " + std::to_string(stream), e);
    }
}

inline std::size_t total(const std::vector<std::size_t>& v) {
    std::size_t t = 0;
    for (std::size_t x : v) t += x;
    return t;
}

/// Case 1's whole workload; returns the bytes planned (each is sent, echoed and checked).
inline Task<long> echo_workload(Ctx& ctx, Counted, eddy::net::TcpListener& listener, int streams, int messages, Rng r) {
    std::vector<JoinHandle<void>> handles;
    long planned = 0;
    handles.push_back(eddy::spawn(acceptor(ctx, ctx.life(), listener, streams)));
    for (int i = 0; i < streams; ++i) {
        EchoPlan plan = plan_stream(r, messages);
        planned += static_cast<long>(total(plan.sizes));
        const std::uint64_t stream = mix(ctx.seed, 1000 + static_cast<std::uint64_t>(i));
        handles.push_back(
            eddy::spawn(tcp_client(ctx, ctx.life(), listener.local_address(), stream, std::move(plan), Rng{r.next()})));
    }
    for (int i = 0; i < streams; ++i) {
        EchoPlan plan = plan_stream(r, messages);
        planned += static_cast<long>(total(plan.sizes));
        auto [a, b] = pipe_duplex(r);
        const std::uint64_t stream = mix(ctx.seed, 2000 + static_cast<std::uint64_t>(i));
        eddy::spawn(echoer(ctx, ctx.life(), std::move(b), plan.echo_buffer)).detach();
        handles.push_back(
            eddy::spawn(pinger(ctx, ctx.life(), std::move(a), stream, std::move(plan.sizes), Rng{r.next()})));
    }
    for (auto& h : handles) co_await std::move(h);
    co_return planned;
}

}  // namespace eddy::test::io_stress
