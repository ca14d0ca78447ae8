// tests/time/deadline_test.cpp: eddy::with_deadline(time, task) and this_task::deadline(): who
// inherits a deadline (awaited tasks, when_all/when_any/TaskGroup/with_timeout children, not
// spawned or shielded tasks), nesting only tightens, and what I/O does under it: a read from
// a silent TCP or Unix peer, a pipe read and an accept throw TimedOut (and the connection
// stays usable), a deadline already past throws without submitting, an operation that
// completes first keeps its value and its link timeout's completion is swallowed (no stray
// completion, nothing left in flight), and a stop token still gives OperationCancelled.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <eddy/eddy.hpp>

#include "support/net_helpers.hpp"

using eddy::OperationCancelled;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::TimedOut;
using eddy::test::bytes;
using eddy::test::run;
using eddy::test::text;
using Clock = std::chrono::steady_clock;
using Deadline = std::optional<Clock::time_point>;
using namespace std::chrono_literals;

namespace {

Task<Deadline> my_deadline() { co_return co_await eddy::this_task::deadline(); }
Task<Deadline> nested_deadline() { co_return co_await my_deadline(); }

/// What a read of `n` bytes gives, or "timed out" / "cancelled".
template <class A>
Task<std::string> outcome(A awaiter_maker) {
    try {
        co_return std::to_string(co_await awaiter_maker());
    } catch (const TimedOut&) {
        co_return "timed out";
    } catch (const OperationCancelled&) {
        co_return "cancelled";
    }
}

Task<std::size_t> read_pipe(int fd, std::span<std::byte> buf) { co_return co_await eddy::io::read(fd, buf); }
Task<std::size_t> read_stream(auto& s, std::span<std::byte> buf) { co_return co_await s.read(buf); }

}  // namespace

TEST_CASE("this_task::deadline: none outside, the one set inside, inherited by awaited tasks") {
    Runtime rt(RuntimeConfig{.workers = 2});
    CHECK(run(rt, my_deadline()) == std::nullopt);
    const Clock::time_point d = Clock::now() + 10s;
    CHECK(run(rt, eddy::with_deadline(d, my_deadline())) == d);
    CHECK(run(rt, eddy::with_deadline(d, nested_deadline())) == d);
    // Relative: measured from when it starts.
    const Clock::time_point before = Clock::now();
    const Deadline rel = run(rt, eddy::with_deadline(5s, my_deadline()));
    REQUIRE(rel.has_value());
    CHECK(*rel >= before + 5s);
    CHECK(*rel <= Clock::now() + 5s);
}

TEST_CASE("with_deadline: when_all, when_any, TaskGroup, with_timeout and task_local children inherit it") {
    Runtime rt(RuntimeConfig{.workers = 2});
    const Clock::time_point d = Clock::now() + 10s;
    auto [a, b] = run(rt, eddy::with_deadline(d, eddy::when_all(my_deadline(), nested_deadline())));
    CHECK(a == d);
    CHECK(b == d);
    auto any = run(rt, eddy::with_deadline(d, eddy::when_any(my_deadline(), nested_deadline())));
    CHECK(std::visit([](const Deadline& x) { return x; }, any) == d);
    auto group = [](Deadline& out) -> Task<void> {
        co_await eddy::task_group([&out](eddy::TaskGroup& g) -> Task<void> {
            g.spawn([](Deadline& o) -> Task<void> { o = co_await eddy::this_task::deadline(); }(out));
            co_return;
        });
    };
    Deadline from_group;
    run(rt, eddy::with_deadline(d, group(from_group)));
    CHECK(from_group == d);
    CHECK(run(rt, eddy::with_deadline(d, eddy::with_timeout(my_deadline(), 30s))) == d);
    static eddy::task_local<int> key;
    CHECK(run(rt, eddy::with_deadline(d, key.scope(1, my_deadline()))) == d);
}

TEST_CASE("with_deadline: nesting only tightens; spawned and shielded tasks do not inherit") {
    Runtime rt(RuntimeConfig{.workers = 2});
    const Clock::time_point near = Clock::now() + 5s;
    const Clock::time_point far = near + 10s;
    CHECK(run(rt, eddy::with_deadline(far, eddy::with_deadline(near, my_deadline()))) == near);
    CHECK(run(rt, eddy::with_deadline(near, eddy::with_deadline(far, my_deadline()))) == near);
    CHECK(run(rt, eddy::with_deadline(near, eddy::with_deadline(1h, my_deadline()))) == near);
    auto spawned = []() -> Task<Deadline> { co_return co_await eddy::spawn(my_deadline()); };
    CHECK(run(rt, eddy::with_deadline(near, spawned())) == std::nullopt);
    CHECK(run(rt, eddy::with_deadline(near, eddy::shield(my_deadline()))) == std::nullopt);
}

TEST_CASE("with_deadline: a read from a TCP peer that never writes times out; the connection stays usable") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
    eddy::test::Connection c = run(rt, eddy::test::connect_pair(listener));
    std::array<std::byte, 16> buf{};
    const auto start = Clock::now();
    const std::string r = run(rt, outcome([&] { return eddy::with_deadline(100ms, read_stream(c.client, buf)); }));
    const auto took = Clock::now() - start;
    CHECK(r == "timed out");
    CHECK(took >= 100ms);
    CHECK(took < 2s);
    // Still usable: the server writes now, the client reads it without a deadline.
    run(rt, [](eddy::test::Connection& conn) -> Task<void> { co_await conn.server.write_all(bytes("hi")); }(c));
    const std::size_t n = run(rt, read_stream(c.client, buf));
    CHECK(text(std::span(buf).first(n)) == "hi");
    // A write and a read under a far deadline work as without one.
    run(rt, eddy::with_deadline(10s, [](eddy::test::Connection& conn) -> Task<void> {
            co_await conn.client.write_all(bytes("again"));
            co_return;
        }(c)));
    CHECK(run(rt, eddy::with_deadline(10s, read_stream(c.server, buf))) == 5);
    c.client.close();
    c.server.close();
}

TEST_CASE("with_deadline: a Unix stream read times out, and a read racing data under a far deadline gets it") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto unix_pair = eddy::net::UnixStream::pair();  // not a structured binding: clang 14 lambdas
    auto& a = unix_pair.first;
    auto& b = unix_pair.second;
    std::array<std::byte, 16> buf{};
    const auto start = Clock::now();
    CHECK(run(rt, outcome([&] { return eddy::with_deadline(100ms, read_stream(a, buf)); })) == "timed out");
    CHECK(Clock::now() - start < 2s);
    // The reader waits (under a far deadline) while another task writes later.
    auto race = [](eddy::net::UnixStream& end_a, eddy::net::UnixStream& end_b,
                   std::span<std::byte> buffer) -> Task<std::size_t> {
        auto writer = [](eddy::net::UnixStream& peer) -> Task<void> {
            co_await eddy::sleep(20ms);
            co_await peer.write_all(bytes("xyz"));
        };
        auto [n, unit] = co_await eddy::when_all(eddy::with_deadline(10s, read_stream(end_a, buffer)), writer(end_b));
        (void)unit;
        co_return n;
    };
    CHECK(run(rt, race(a, b, buf)) == 3);
    CHECK(text(std::span(buf).first(3)) == "xyz");
}

TEST_CASE("with_deadline: a pipe read (an io_uring operation) times out; the pipe stays usable") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto p = eddy::io::pipe();
    std::array<std::byte, 16> buf{};
    const auto start = Clock::now();
    CHECK(run(rt, outcome([&] { return eddy::with_deadline(100ms, read_pipe(p.read_end.get(), buf)); })) ==
          "timed out");
    const auto took = Clock::now() - start;
    CHECK(took >= 100ms);
    CHECK(took < 2s);
    REQUIRE(::write(p.write_end.get(), "ok", 2) == 2);
    CHECK(run(rt, eddy::with_deadline(10s, read_pipe(p.read_end.get(), buf))) == 2);
    // A non-blocking end: -EAGAIN becomes a readiness poll, which carries the deadline too.
    REQUIRE(::fcntl(p.read_end.get(), F_SETFL, O_NONBLOCK) == 0);
    CHECK(run(rt, outcome([&] { return eddy::with_deadline(100ms, read_pipe(p.read_end.get(), buf)); })) ==
          "timed out");
}

TEST_CASE("with_deadline: accept times out; the listener accepts afterwards") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
    auto accept_one = [](eddy::net::TcpListener& l) -> Task<std::size_t> {
        eddy::net::TcpStream s = co_await l.accept();
        co_return 1;
    };
    const auto start = Clock::now();
    CHECK(run(rt, outcome([&] { return eddy::with_deadline(100ms, accept_one(listener)); })) == "timed out");
    CHECK(Clock::now() - start < 2s);
    eddy::test::Connection c = run(rt, eddy::with_deadline(10s, eddy::test::connect_pair(listener)));
    run(rt, [](eddy::test::Connection& conn) -> Task<void> { co_await conn.server.write_all(bytes("z")); }(c));
    std::array<std::byte, 4> buf{};
    CHECK(run(rt, read_stream(c.client, buf)) == 1);
}

TEST_CASE("with_deadline: a deadline already past throws at once, without submitting; ready data still wins") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto p = eddy::io::pipe();
    std::array<std::byte, 16> buf{};
    const auto ops_before = rt.metrics().reactor.operations;
    const auto start = Clock::now();
    CHECK(run(rt, outcome([&] { return eddy::with_deadline(Clock::now() - 1s, read_pipe(p.read_end.get(), buf)); })) ==
          "timed out");
    CHECK(run(rt, outcome([&] { return eddy::with_deadline(0ms, read_pipe(p.read_end.get(), buf)); })) == "timed out");
    auto unix_pair = eddy::net::UnixStream::pair();  // not a structured binding: clang 14 lambdas
    auto& a = unix_pair.first;
    CHECK(run(rt, outcome([&] { return eddy::with_deadline(-5ms, read_stream(a, buf)); })) == "timed out");
    CHECK(Clock::now() - start < 2s);
    CHECK(rt.metrics().reactor.operations == ops_before);  // nothing reached the reactor
    CHECK(rt.metrics().reactor.sockets_polled == 0);
    // Data already there is taken on the worker, deadline or not (nothing to wait for).
    REQUIRE(::write(p.write_end.get(), "abc", 3) == 3);
    CHECK(run(rt, eddy::with_deadline(Clock::now() - 1s, read_pipe(p.read_end.get(), buf))) == 3);
}

TEST_CASE(
    "with_deadline: 1000 operations that complete first keep their values; the link timeouts leave nothing behind") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto p = eddy::io::pipe();
    REQUIRE(::write(p.write_end.get(), "x", 1) == 1);  // readable from now on
    const auto before = rt.metrics().reactor;
    auto polls = [](int fd) -> Task<int> {
        int ready = 0;
        for (int i = 0; i < 1000; ++i)
            if ((co_await eddy::io::readable(fd) & POLLIN) != 0) ++ready;
        co_return ready;
    };
    CHECK(run(rt, eddy::with_deadline(30s, polls(p.read_end.get()))) == 1000);
    // Reads that wait, each raced by a write from another task.
    auto waits = [](int rd, int wr) -> Task<int> {
        std::array<std::byte, 1> b{};
        (void)co_await eddy::io::read(rd, b);  // the "x"
        int got = 0;
        for (int i = 0; i < 200; ++i) {
            auto writer = [](int wfd) -> Task<void> {
                co_await eddy::yield_now();
                (void)co_await eddy::io::write(wfd, bytes("y"));
            };
            auto [n, unit] = co_await eddy::when_all(read_pipe(rd, b), writer(wr));
            (void)unit;
            got += static_cast<int>(n);
        }
        co_return got;
    };
    CHECK(run(rt, eddy::with_deadline(30s, waits(p.read_end.get(), p.write_end.get()))) == 200);
    const auto after_ops = rt.metrics().reactor;
    CHECK(after_ops.operations - before.operations >= 1000);
    // Each one went with its link timeout: two SQEs (and two CQEs) at least. (io_uring only:
    // the readiness driver keeps deadlines on its own list, reactor_epoll.cpp.)
    if (after_ops.driver == eddy::IoDriver::io_uring)
        CHECK(after_ops.submissions - before.submissions >= 2 * (after_ops.operations - before.operations));
    // Every completion arrived, the link timeouts' too: the ring owes nothing beyond its
    // own wake-up read. (The gauge is published at the end of a reactor round.)
    const auto limit = Clock::now() + 5s;
    while (rt.metrics().reactor.in_flight > 1 && Clock::now() < limit) std::this_thread::sleep_for(1ms);
    CHECK(rt.metrics().reactor.in_flight <= 1);
}

TEST_CASE("with_deadline: a stop token still cancels (OperationCancelled), on the op path and the socket path") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto p = eddy::io::pipe();
    auto unix_pair = eddy::net::UnixStream::pair();  // not a structured binding: clang 14 lambdas
    auto& a = unix_pair.first;
    std::array<std::byte, 16> buf{};
    std::stop_source pipe_stop, sock_stop;
    auto stop_later = [](std::stop_source& s) -> Task<void> {
        co_await eddy::sleep(50ms);
        s.request_stop();
    };
    auto both = [&]() -> Task<std::pair<std::string, std::string>> {
        auto [x, y, u1, u2] = co_await eddy::when_all(
            outcome([&] { return eddy::io::read(p.read_end.get(), buf, pipe_stop.get_token()); }),
            outcome([&] { return a.read(std::span(buf).first(8), sock_stop.get_token()); }), stop_later(pipe_stop),
            stop_later(sock_stop));
        (void)u1;
        (void)u2;
        co_return std::pair{x, y};
    };
    const auto r = run(rt, eddy::with_deadline(10s, both()));
    CHECK(r.first == "cancelled");
    CHECK(r.second == "cancelled");
    // And a task cancellation (a when_any loser) under a deadline stops its read at once.
    auto race = [&]() -> Task<std::size_t> {
        auto w =
            co_await eddy::when_any(read_pipe(p.read_end.get(), buf), [](std::span<std::byte>) -> Task<std::size_t> {
                co_await eddy::sleep(20ms);
                co_return 7;
            }(buf));
        co_return std::get<1>(w);
    };
    CHECK(run(rt, eddy::with_deadline(10s, race())) == 7);
}

TEST_CASE("with_deadline: a runtime shut down while reads wait under a deadline frees everything") {
    auto p = eddy::io::pipe();
    auto unix_pair = eddy::net::UnixStream::pair();
    {
        Runtime rt(RuntimeConfig{.workers = 2});
        auto waiter = [](int fd, eddy::net::UnixStream& s) -> Task<void> {
            std::array<std::byte, 8> a{}, b{};
            co_await eddy::when_all(read_pipe(fd, a), read_stream(s, b));
        };
        auto h = rt.spawn(eddy::with_deadline(30s, waiter(p.read_end.get(), unix_pair.first)));
        // Both reads wait (in the kernel, under their link timeouts) before the shutdown.
        const auto limit = Clock::now() + 10s;
        // io_uring: 2 x (operation + link timeout), and the wake-up read; the readiness
        // driver: the two waits (its deadlines are no kernel requests; its wake-up counts
        // only while the reactor sleeps on it, and the gauge is published before it sleeps,
        // so a round ended by a worker's wake-up publishes it as taken).
        const std::size_t waiting = rt.metrics().reactor.driver == eddy::IoDriver::io_uring ? 4 : 2;
        while (rt.metrics().reactor.in_flight < waiting && Clock::now() < limit) std::this_thread::sleep_for(1ms);
        CHECK(rt.metrics().reactor.in_flight >= waiting);
        rt.shutdown();  // cancels both in the kernel, then destroys the frame
    }
}

TEST_CASE(
    "with_deadline under a paused clock: a 30 s deadline on a silent pipe and socket ends in virtual time, exactly") {
    Runtime rt(RuntimeConfig{.workers = 2, .clock = eddy::ClockMode::paused});
    auto p = eddy::io::pipe();
    auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
    std::array<std::byte, 16> buf{};
    const auto real_start = Clock::now();
    const auto virtual_start = rt.now();
    CHECK(run(rt, outcome([&] { return eddy::with_deadline(30s, read_pipe(p.read_end.get(), buf)); })) == "timed out");
    CHECK(rt.now() - virtual_start >= 30s);
    // The deadline is on the runtime's clock: this_task::deadline() reads it there.
    const Deadline seen = run(rt, eddy::with_deadline(10s, my_deadline()));
    REQUIRE(seen.has_value());
    CHECK(*seen - rt.now() <= 10s);
    auto conn =
        run(rt, eddy::test::connect_pair(listener));  // not a structured binding: clang 14 lambdas cannot capture one
    auto& server = conn.server;
    const auto before = rt.now();
    CHECK(run(rt, outcome([&] { return eddy::with_deadline(30s, read_stream(server, buf)); })) == "timed out");
    CHECK(rt.now() - before >= 30s);
    CHECK(Clock::now() - real_start < 10s);  // a minute of virtual time, in (much) less real time
    // Data that is there wins, deadline or not.
    REQUIRE(::write(p.write_end.get(), "ok", 2) == 2);
    CHECK(run(rt, eddy::with_deadline(30s, read_pipe(p.read_end.get(), buf))) == 2);
}
