// tests/net/socket_io_wake_test.cpp: how tasks waiting on the readiness-based socket path
// (eddy/net/detail/socket_io.hpp, io/reactor/poll_state.hpp) are polled and woken, over
// loopback, IPv4 and IPv6:
//   - two tasks whose first operation on a socket waits at the same moment (two accepts; a read
//     and a write_all): one poll for the socket, and close() ends both as promised;
//   - a completion reaching an idle worker while the other computes until it has run (and,
//     with one worker, running after a 300 ms computation);
//   - 64 readers woken at once.
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

// ---- The first wait of a socket, in two tasks at once ------------------------------------

namespace {

/// Two tasks that meet (both run at once, on the two workers), then start their operations:
/// the test waits until `passed` reads 2 before it quiesces (a quiesce task must not take a
/// worker from a task still waiting to meet the other).
struct Together {
    std::atomic<int> met{0};
    std::atomic<int> passed{0};
    void wait_passed() const {
        const auto deadline = Clock::now() + kDeadline;
        while (passed.load() < 2 && !past(deadline)) std::this_thread::yield();
        REQUIRE(passed.load() == 2);
    }
};
Task<void> meet(Together& t) {
    const std::optional<std::size_t> w = co_await eddy::test::rendezvous(t.met, 2);
    CHECK(w.has_value());
    t.passed.fetch_add(1);
}
Task<std::error_code> accept_together(TcpListener& l, Together& t) {
    co_await meet(t);
    co_return co_await error_of(l.accept());
}
Task<std::pair<std::size_t, std::error_code>> read_together(TcpStream& s, Together& t) {
    co_await meet(t);
    try {
        co_return std::pair{co_await read_count(s), std::error_code{}};
    } catch (const std::system_error& e) {
        co_return std::pair{std::size_t{0}, e.code()};
    }
}
Task<std::error_code> write_together(TcpStream& s, std::span<const std::byte> data, Together& t) {
    co_await meet(t);
    co_return co_await error_of(write_all_task(s, data));
}

}  // namespace

TEST_CASE("two tasks whose first operation on a socket waits at the same moment share the socket's one poll") {
    // Two workers: the two tasks run at once. (The socket's poll state is made by the first
    // operation that has to wait; two of them must not make two.)
    const std::vector<std::byte> payload = eddy::test::pattern(std::size_t{4} << 20);
    for (const SocketAddr& lo : loopbacks()) {
        CAPTURE(lo.to_string());
        for (int round = 0; round < 10; ++round) {
            CAPTURE(round);
            auto listener = TcpListener::bind(lo);
            Runtime rt(RuntimeConfig{.workers = 2});
            bool ok = true;
            {
                // Two accepts on a fresh listener; close() then ends both with EINVAL.
                const std::size_t base = polled(rt);
                Together t;
                Started<std::error_code> a(rt, accept_together(listener, t));
                Started<std::error_code> b(rt, accept_together(listener, t));
                t.wait_passed();
                quiesce(rt, 2);
                const std::size_t polls = settled_polled(rt, base + 1);
                CHECK(polls == base + 1);
                run(rt, close_listener(listener));
                const std::error_code ea = a.get();
                const std::error_code eb = b.get();
                CHECK(ea == std::errc::invalid_argument);
                CHECK(eb == std::errc::invalid_argument);
                const bool back = wait_polled(rt, base, 5s);
                CHECK(back);
                ok = ok && polls == base + 1 && ea == std::errc::invalid_argument &&
                     eb == std::errc::invalid_argument && back;
            }
            {
                // A read and a write_all on a fresh stream whose send buffer is full.
                auto l2 = TcpListener::bind(lo);
                FileDescriptor peer = plain_connect(l2.local_address(), 4096);
                TcpStream s = run(rt, l2.accept());
                eddy::test::set_int_sockopt(s.native_handle(), SOL_SOCKET, SO_SNDBUF, 4096);
                std::array<std::byte, 1024> fill{};
                while (::send(s.native_handle(), fill.data(), fill.size(), MSG_DONTWAIT | MSG_NOSIGNAL) > 0) {
                }
                const std::size_t base = polled(rt);
                Together t;
                Started<std::pair<std::size_t, std::error_code>> reader(rt, read_together(s, t));
                Started<std::error_code> writer(rt, write_together(s, payload, t));
                t.wait_passed();
                quiesce(rt, 2);
                const std::size_t polls = settled_polled(rt, base + 1);
                CHECK(polls == base + 1);
                run(rt, close_stream(s));
                const auto [n, er] = reader.get();
                const std::error_code ew = writer.get();
                CHECK(n == 0);
                CHECK(er == std::error_code{});
                CHECK(ew == std::errc::broken_pipe);
                const bool back = wait_polled(rt, base, 5s);
                CHECK(back);
                ok = ok && polls == base + 1 && n == 0 && !er && ew == std::errc::broken_pipe && back;
            }
            if (!ok) break;  // one failing round says it all (each failure waits kDeadline for the gauge)
        }
    }
}

// ---- A completion while a worker is busy ----------------------------------------------

namespace {

/// Computes without suspending for `d`, or, given `until`, until it is set (bounded by
/// kDeadline); returns when it finished.
Task<Clock::time_point> compute(std::chrono::milliseconds d, std::atomic<bool>& started,
                                const std::atomic<bool>* until = nullptr) {
    started.store(true);
    const auto end = Clock::now() + (until != nullptr ? Clock::duration(kDeadline) : Clock::duration(d));
    std::uint64_t x = 1;
    while (Clock::now() < end && (until == nullptr || !until->load()))
        x = x * 6364136223846793005u + 1442695040888963407u;
    volatile std::uint64_t sink = x;
    (void)sink;
    co_return Clock::now();
}

struct Reply {
    std::string data;
    Clock::time_point at;
};

/// Reads the ping, notes when, then sets `read`.
Task<Reply> read_ping(TcpStream& s, std::atomic<bool>& read) {
    Reply r;
    r.data = co_await read_exact_text(s, 4);
    r.at = Clock::now();
    read.store(true);
    co_return r;
}

}  // namespace

// With two workers the computation lasts until the read has run, which only the idle worker
// can do meanwhile (bounded by kDeadline: a read left for the busy worker shows as a 20 s
// computation that ended first). A fixed 300 ms left the writer thread, the reactor and the
// idle worker 280 ms between them, which a loaded machine can take from them. With one
// worker the computation is 300 ms: the read can only run after it, however long that takes.
TEST_CASE("a read completion is run by the idle worker while the other computes; with one worker, after it") {
    for_each_loopback({2, 1}, [&](const SocketAddr& lo, const std::size_t workers) {
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = workers});
        FileDescriptor peer = plain_connect(listener.local_address());
        TcpStream s = run(rt, listener.accept());
        const std::size_t base = polled(rt);

        std::atomic<bool> read{false};
        Started<Reply> reader(rt, read_ping(s, read));
        REQUIRE(wait_polled(rt, base + 1));  // waiting
        std::atomic<bool> computing{false};
        Started<Clock::time_point> busy(rt, compute(300ms, computing, workers == 2 ? &read : nullptr));
        REQUIRE(spin_until(computing));
        std::atomic<bool> send_failed{false};
        std::thread writer([&] {
            std::this_thread::sleep_for(20ms);
            if (!send_all(peer.get(), "ping")) send_failed.store(true);
        });
        writer.join();
        const Reply r = reader.get();
        const Clock::time_point computed = busy.get();
        CHECK_FALSE(send_failed.load());
        CHECK(r.data == "ping");
        if (workers == 2) CHECK(r.at < computed);  // the idle worker ran it: no waiting for the computation
        else CHECK(r.at >= computed);              // the only worker was busy: it ran the read afterwards
    });
}

// ---- Many readers woken at once --------------------------------------------------------

namespace {

std::string message(int conn, int round) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "conn %02d round %d|", conn, round);
    return buf;
}

Task<std::vector<std::string>> read_messages(std::vector<TcpStream>& streams, int round) {
    std::vector<Task<std::string>> readers;
    for (std::size_t i = 0; i < streams.size(); ++i)
        readers.push_back(read_exact_text(streams[i], message(static_cast<int>(i), round).size()));
    co_return co_await eddy::when_all(std::move(readers));
}

}  // namespace

TEST_CASE("64 readers waiting on 64 connections are all woken by a peer writing to every one at once") {
    constexpr int kConns = 64;
    for_each_loopback([&](const SocketAddr& lo, const std::size_t workers) {
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = workers});
        std::vector<FileDescriptor> peers;
        std::vector<TcpStream> streams;
        for (int i = 0; i < kConns; ++i) {
            peers.push_back(plain_connect(listener.local_address()));
            streams.push_back(run(rt, listener.accept()));
        }
        const std::size_t base = polled(rt);
        for (int round = 0; round < 3; ++round) {
            CAPTURE(round);
            Started<std::vector<std::string>> all(rt, read_messages(streams, round));
            // The first round: every reader queued itself (one poll per socket). Later
            // rounds reuse the armed polls; they wait (almost always) after the quiesce.
            if (round == 0) REQUIRE(wait_polled(rt, base + kConns));
            quiesce(rt, workers);
            CHECK_FALSE(all.ready());
            std::atomic<int> send_failures{0};
            std::thread writer([&] {
                for (int i = 0; i < kConns; ++i)
                    if (!send_all(peers[static_cast<std::size_t>(i)].get(), message(i, round)))
                        send_failures.fetch_add(1);
            });
            writer.join();
            const std::vector<std::string> got = all.get();
            CHECK(send_failures.load() == 0);
            REQUIRE(got.size() == static_cast<std::size_t>(kConns));
            for (int i = 0; i < kConns; ++i) {
                CAPTURE(i);
                CHECK(got[static_cast<std::size_t>(i)] == message(i, round));
            }
            CHECK(polled(rt) == base + kConns);  // one poll per socket, armed once for its life
        }
        streams.clear();
        CHECK(wait_polled(rt, base));
    });
}
