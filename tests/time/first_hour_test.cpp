// tests/time/first_hour_test.cpp: the lines a Tokio user writes in the first hour, each with
// the behaviour Tokio gives: the library's own operations under with_timeout, timeout_or,
// when_any and when_all, without a wrapper task. On a paused clock (virtual time,
// eddy/runtime/time.hpp), so that a timeout fires when the test says, on any machine load.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <variant>
#include <vector>

#include <eddy/eddy.hpp>

#include "support/counted.hpp"
#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::TimedOut;
using eddy::test::bytes;
using eddy::test::Connection;
using eddy::test::run;
using eddy::test::text;
using namespace std::chrono_literals;

namespace {

RuntimeConfig paused() { return RuntimeConfig{.workers = 2, .clock = eddy::ClockMode::paused}; }

/// A loopback TCP pair without Nagle's delay: a paused clock does not wait for I/O, so a small
/// write held back for an ACK the peer delays (up to 40 ms) would lose to a timeout.
Task<Connection> pair() {
    auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
    Connection c = co_await eddy::test::connect_pair(listener);
    c.client.set_nodelay(true);
    c.server.set_nodelay(true);
    co_return c;
}

}  // namespace

TEST_CASE("with_timeout(stream.read(buf), 1s): the bytes in time, TimedOut without them") {
    Runtime rt(paused());
    const auto start = rt.now();
    run(rt, []() -> Task<void> {
        Connection c = co_await pair();
        std::array<std::byte, 64> buf{};
        CHECK_THROWS_AS(co_await eddy::with_timeout(c.server.read(buf), 1s), TimedOut);
        co_await c.client.write_all(bytes("late bytes"));
        // Nothing was lost to the timed-out read: the next one gets every byte.
        const std::size_t n = co_await eddy::with_timeout(c.server.read(buf), 1s);
        CHECK(text(std::span(buf).first(n)) == "late bytes");
        // A time point works too.
        co_await c.client.write_all(bytes("x"));
        CHECK(co_await eddy::with_timeout(c.server.read(buf), eddy::time::now() + 1s) == 1);
    }());
    CHECK(rt.now() - start == 1s);  // exactly the one timeout's second of virtual time
}

TEST_CASE("timeout_or(stream.read(buf), 1s) gives std::nullopt instead of throwing") {
    Runtime rt(paused());
    run(rt, []() -> Task<void> {
        Connection c = co_await pair();
        std::array<std::byte, 64> buf{};
        std::optional<std::size_t> none = co_await eddy::timeout_or(c.server.read(buf), 1s);
        CHECK_FALSE(none.has_value());
        // The point of a value: code that reacts may co_await (no catch block around it).
        co_await c.server.write_all(bytes("idle"));
        std::array<std::byte, 8> got{};
        std::optional<std::size_t> n = co_await eddy::timeout_or(c.client.read(got), 1s);
        REQUIRE(n.has_value());
        CHECK(text(std::span(got).first(*n)) == "idle");
        // void: true in time, false not.
        CHECK(co_await eddy::timeout_or(eddy::sleep(1ms), 1s));
        CHECK_FALSE(co_await eddy::timeout_or(eddy::sleep(2s), 1s));
    }());
}

TEST_CASE("when_any(stream.read(buf), eddy::sleep(1s)): the read's count, or the sleep's index") {
    Runtime rt(paused());
    run(rt, []() -> Task<void> {
        Connection c = co_await pair();
        std::array<std::byte, 64> buf{};
        std::variant<std::size_t, std::monostate> r = co_await eddy::when_any(c.server.read(buf), eddy::sleep(1s));
        CHECK(r.index() == 1);
        co_await c.client.write_all(bytes("abc"));
        r = co_await eddy::when_any(c.server.read(buf), eddy::sleep(1s));
        REQUIRE(r.index() == 0);
        CHECK(std::get<0>(r) == 3);
        // The sleep first: the indexes follow the arguments.
        std::variant<std::monostate, std::size_t> s = co_await eddy::when_any(eddy::sleep(1s), c.server.read(buf));
        CHECK(s.index() == 0);
    }());
}

TEST_CASE("when_all(stream.read(buf), eddy::sleep(1s)) waits for both") {
    Runtime rt(paused());
    const auto start = rt.now();
    run(rt, []() -> Task<void> {
        Connection c = co_await pair();
        std::array<std::byte, 64> buf{};
        co_await c.client.write_all(bytes("hello"));
        auto [n, slept] = co_await eddy::when_all(c.server.read(buf), eddy::sleep(1s));
        CHECK(n == 5);
        CHECK(std::is_same_v<decltype(slept), std::monostate>);
    }());
    CHECK(rt.now() - start == 1s);
}

TEST_CASE("with_timeout(channel.receive(), 1s): the value, or TimedOut and nothing lost") {
    Runtime rt(paused());
    run(rt, []() -> Task<void> {
        eddy::Channel<int> channel(4);
        CHECK_THROWS_AS(co_await eddy::with_timeout(channel.receive(), 1s), TimedOut);
        co_await channel.send(7);
        std::optional<int> v = co_await eddy::with_timeout(channel.receive(), 1s);
        CHECK(v == 7);
        CHECK(channel.size() == 0);
    }());
}

TEST_CASE("with_timeout(mutex.lock(), 1s): the guard, or TimedOut while another task holds it") {
    Runtime rt(paused());
    run(rt, []() -> Task<void> {
        eddy::Mutex mutex;
        {
            eddy::MutexGuard held = co_await mutex.lock();
            CHECK_THROWS_AS((void)co_await eddy::with_timeout(mutex.lock(), 1s), TimedOut);
        }
        eddy::MutexGuard g = co_await eddy::with_timeout(mutex.lock(), 1s);
        CHECK(g.owns_lock());
    }());
}

TEST_CASE("with_timeout(event.wait(), 1s): TimedOut while unset, at once once set") {
    Runtime rt(paused());
    const auto start = rt.now();
    run(rt, []() -> Task<void> {
        eddy::Event event;
        CHECK_THROWS_AS(co_await eddy::with_timeout(event.wait(), 1s), TimedOut);
        event.set();
        CHECK_NOTHROW(co_await eddy::with_timeout(event.wait(), 1s));
        CHECK(co_await eddy::timeout_or(event.wait(), 1s));
    }());
    CHECK(rt.now() - start == 1s);
}

TEST_CASE("with_timeout(eddy::sleep(2s), 1s) times out; with_timeout(eddy::sleep(1s), 2s) does not") {
    Runtime rt(paused());
    const auto start = rt.now();
    run(rt, []() -> Task<void> {
        CHECK_THROWS_AS(co_await eddy::with_timeout(eddy::sleep(2s), 1s), TimedOut);
        CHECK_NOTHROW(co_await eddy::with_timeout(eddy::sleep(1s), 2s));
    }());
    CHECK(rt.now() - start == 2s);
}

TEST_CASE("with_timeout(stream.write_all(big), d): last month's line compiles and times out") {
    Runtime rt(paused());
    run(rt, []() -> Task<void> {
        Connection c = co_await pair();
        // Nobody reads: the send buffers fill and write_all waits for room that never comes.
        std::vector<std::byte> big(64 << 20, std::byte{'x'});
        CHECK_THROWS_AS(co_await eddy::with_timeout(c.client.write_all(big), 300ms), TimedOut);
    }());
}

TEST_CASE("the awaiter's own cancellation is OperationCancelled, not TimedOut") {
    Runtime rt(paused());
    run(rt, []() -> Task<void> {
        Connection c = co_await pair();
        std::array<std::byte, 64> buf{};
        std::stop_source stop;
        stop.request_stop();
        auto timed_read = [](eddy::net::TcpStream& s, std::span<std::byte> b) -> Task<std::size_t> {
            co_return co_await eddy::with_timeout(s.read(b), 1s);
        };
        CHECK_THROWS_AS(co_await eddy::with_stop_token(timed_read(c.server, buf), stop.get_token()),
                        eddy::OperationCancelled);
    }());
}

namespace {

/// Waits on an idle read under a long timeout (or raced against a long sleep) until the
/// runtime goes; `alive` counts its frame.
Task<void> idle_reader(eddy::net::TcpStream s, eddy::test::Counted alive, bool race, std::atomic<int>* waiting) {
    (void)alive;
    std::array<std::byte, 16> buf{};
    waiting->fetch_add(1);
    if (race) {
        (void)co_await eddy::when_any(s.read(buf), eddy::sleep(1h));
    } else {
        (void)co_await eddy::with_timeout(s.read(buf), 1h);
    }
}

}  // namespace

TEST_CASE("a runtime destroyed while tasks wait in with_timeout(read) or when_any(read, sleep) frees them") {
    eddy::test::LifetimeCounter frames;
    std::atomic<int> waiting{0};
    std::vector<Connection> peers;  // the other ends, kept open so that the reads wait
    {
        Runtime rt(RuntimeConfig{.workers = 2});
        for (int i = 0; i < 8; ++i) {
            Connection c = run(rt, pair());
            rt.spawn(idle_reader(std::move(c.server), eddy::test::Counted(frames), i % 2 == 1, &waiting));
            peers.push_back(std::move(c));
        }
        // Every reader is inside its await before the runtime goes (the count is bumped just
        // before it; the rest of the way is a few instructions on a worker).
        while (waiting.load() < 8) std::this_thread::yield();
    }  // ~Runtime destroys the suspended frames: the timers, scopes and reads let go in order
    CHECK(frames.alive() == 0);
    CHECK(frames.constructions() > 0);
}
