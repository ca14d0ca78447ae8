// tests/net/socket_io_close_test.cpp: ending what waits on the readiness-based socket path
// (eddy/net/detail/socket_io.hpp) over loopback, IPv4 and IPv6:
//   - close() from another task while tasks wait: a write on a full socket fails with EPIPE, a
//     read and a write waiting together end with 0 and EPIPE, several accepts with EINVAL (one
//     pending accept is tcp_close_test.cpp's);
//   - four tasks accepting on one listener: 100 connections, each accepted once, every acceptor
//     stopped by one stop_source, no descriptor left open.
// The peer and the helpers: tests/support/socket_io.hpp.
#include <doctest/doctest.h>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <eddy/eddy.hpp>

#include "support/socket_io.hpp"

using namespace eddy::test::socket_io;

// ---- close() from another task while tasks wait ---------------------------------------

TEST_CASE("close() from another task ends a write_all waiting on a full socket with EPIPE") {
    const std::vector<std::byte> payload = eddy::test::pattern(std::size_t{4} << 20);
    for_each_loopback([&](const SocketAddr& lo, const std::size_t workers) {
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = workers});
        FileDescriptor peer = plain_connect(listener.local_address(), 4096);  // never reads until the end
        TcpStream s = run(rt, listener.accept());
        eddy::test::set_int_sockopt(s.native_handle(), SOL_SOCKET, SO_SNDBUF, 4096);
        const std::size_t base = polled(rt);

        Started<std::error_code> writer(rt, error_of(write_all_task(s, payload)));
        REQUIRE(wait_polled(rt, base + 1));  // 4 MiB do not fit: write_all waits for room
        CHECK_FALSE(writer.ready());
        run(rt, close_stream(s));
        CHECK(writer.get() == std::errc::broken_pipe);
        CHECK(s.native_handle() == -1);
        CHECK(wait_polled(rt, base));

        // The peer reads what was sent before the close, in order, then end of stream.
        std::string got;
        std::array<char, 4096> buf;
        for (;;) {
            const ssize_t n = ::recv(peer.get(), buf.data(), buf.size(), 0);
            if (n < 0 && errno == EINTR) continue;
            REQUIRE(n >= 0);
            if (n == 0) break;
            got.append(buf.data(), static_cast<std::size_t>(n));
        }
        CHECK(got.size() < payload.size());
        CHECK(got == text(std::span(payload).first(got.size())));
    });
}

TEST_CASE(
    "close() while a read and a write_all wait on the same stream: the read returns 0, the write fails with EPIPE") {
    const std::vector<std::byte> payload = eddy::test::pattern(std::size_t{4} << 20);
    for_each_loopback([&](const SocketAddr& lo, const std::size_t workers) {
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = workers});
        FileDescriptor peer = plain_connect(listener.local_address(), 4096);  // never writes nor reads
        TcpStream s = run(rt, listener.accept());
        eddy::test::set_int_sockopt(s.native_handle(), SOL_SOCKET, SO_SNDBUF, 4096);
        const std::size_t base = polled(rt);

        Started<std::size_t> reader(rt, read_count(s));
        REQUIRE(wait_polled(rt, base + 1));  // the read waits
        std::atomic<bool> writing{false};
        Started<std::error_code> writer(rt, error_of(write_all_task(s, payload, &writing)));
        REQUIRE(spin_until(writing));
        quiesce(rt, workers);  // the write_all has filled the socket and waits too
        CHECK_FALSE(reader.ready());
        CHECK_FALSE(writer.ready());
        run(rt, close_stream(s));
        CHECK(reader.get() == 0);
        CHECK(writer.get() == std::errc::broken_pipe);
        CHECK(wait_polled(rt, base));
    });
}

TEST_CASE("close() from another task ends every accept waiting on the listener with EINVAL") {
    for_each_loopback([&](const SocketAddr& lo, const std::size_t workers) {
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = workers});
        const std::size_t base = polled(rt);
        std::vector<Started<std::error_code>> acceptors;
        acceptors.emplace_back(rt, error_of(listener.accept()));
        REQUIRE(wait_polled(rt, base + 1));
        acceptors.emplace_back(rt, error_of(listener.accept()));
        acceptors.emplace_back(rt, error_of(listener.accept_with_address()));
        quiesce(rt, workers);  // all three wait
        for (auto& a : acceptors) CHECK_FALSE(a.ready());
        run(rt, close_listener(listener));
        for (auto& a : acceptors) CHECK(a.get() == std::errc::invalid_argument);
        CHECK(wait_polled(rt, base));
        CHECK(listener.native_handle() == -1);
    });
}

// ---- Several acceptors on one listener -------------------------------------------------

namespace {

constexpr int kClients = 100;

struct Accepted {
    std::vector<TcpStream> streams;
    bool cancelled = false;
    int bad_ids = 0;
};

/// Accepts until cancelled; reads each connection's 4-byte id and counts it in `seen`.
Task<Accepted> acceptor(TcpListener& listener, std::stop_token stop, std::array<std::atomic<int>, kClients>& seen,
                        std::atomic<int>& accepted) {
    Accepted r;
    try {
        for (;;) {
            TcpStream s = co_await listener.accept(stop);
            std::array<std::byte, 4> raw;
            co_await s.read_exact(raw);
            std::uint32_t id = 0;
            std::memcpy(&id, raw.data(), sizeof id);
            if (id < static_cast<std::uint32_t>(kClients)) seen[id].fetch_add(1);
            else ++r.bad_ids;
            r.streams.push_back(std::move(s));
            accepted.fetch_add(1);
        }
    } catch (const OperationCancelled&) {
        r.cancelled = true;
    }
    co_return r;
}

}  // namespace

TEST_CASE("four tasks accepting on one listener: 100 connections each accepted once, all stopped by one stop_source") {
    for_each_loopback([&](const SocketAddr& lo, const std::size_t workers) {
        const std::size_t fds_before = open_fds();
        {
            auto listener = TcpListener::bind(lo);
            const SocketAddr addr = listener.local_address();
            std::array<std::atomic<int>, kClients> seen{};
            std::atomic<int> accepted{0};
            Runtime rt(RuntimeConfig{.workers = workers});
            std::stop_source stop;
            std::vector<Started<Accepted>> acceptors;
            const std::size_t base = polled(rt);
            for (int i = 0; i < 4; ++i)
                acceptors.emplace_back(rt, acceptor(listener, stop.get_token(), seen, accepted));
            quiesce(rt, workers);
            CHECK(settled_polled(rt, base + 1) == base + 1);  // one poll for the listener, however many wait

            // Four plain threads connect 25 clients each and send their ids.
            std::vector<FileDescriptor> clients(kClients);
            std::atomic<int> client_failures{0};
            std::vector<std::thread> threads;
            for (int t = 0; t < 4; ++t) {
                threads.emplace_back([&, t] {
                    for (int i = t; i < kClients; i += 4) {
                        FileDescriptor fd(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
                        if (fd.get() < 0 || connect_blocking(fd.get(), addr) != 0) {
                            client_failures.fetch_add(1);
                            continue;
                        }
                        const auto id = static_cast<std::uint32_t>(i);
                        std::array<std::byte, 4> raw;
                        std::memcpy(raw.data(), &id, sizeof id);
                        if (!send_all(fd.get(), raw)) client_failures.fetch_add(1);
                        clients[static_cast<std::size_t>(i)] = std::move(fd);
                    }
                });
            }
            for (auto& th : threads) th.join();
            REQUIRE(client_failures.load() == 0);

            const auto deadline = Clock::now() + kDeadline;
            while (accepted.load() < kClients && !past(deadline)) std::this_thread::sleep_for(1ms);
            CHECK(accepted.load() == kClients);
            stop.request_stop();  // from this plain thread: every acceptor waits in accept
            std::size_t streams = 0;
            int bad_ids = 0;
            for (auto& a : acceptors) {
                Accepted r = a.get();
                CHECK(r.cancelled);
                streams += r.streams.size();
                bad_ids += r.bad_ids;
            }
            CHECK(streams == static_cast<std::size_t>(kClients));
            CHECK(bad_ids == 0);
            for (int i = 0; i < kClients; ++i) {
                CAPTURE(i);
                CHECK(seen[static_cast<std::size_t>(i)].load() == 1);
            }
            // Nothing more was accepted after the stop: the backlog is empty.
            CHECK(accepted.load() == kClients);
        }  // clients, the accepted streams (in the results), the listener and the runtime close
        CHECK(open_fds() == fds_before);
    });
}
