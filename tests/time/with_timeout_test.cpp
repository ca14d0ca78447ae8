// tests/time/with_timeout_test.cpp: eddy::with_timeout / with_deadline on a sleep and on a
// socket read: the value when in time, TimedOut (after the task stopped) when not, the
// socket still usable afterwards, exceptions passed through, and misuse. The tests that
// depend on time run twice: on a real clock, and on a paused one (virtual time,
// eddy/runtime/time.hpp), where the durations they measure are exact.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>

#include <eddy/eddy.hpp>

#include "support/counted.hpp"
#include "support/net_helpers.hpp"
#include "support/sleeper.hpp"

using eddy::OperationCancelled;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::TimedOut;
using eddy::test::bytes;
using eddy::test::Connection;
using eddy::test::Counted;
using eddy::test::LifetimeCounter;
using eddy::test::run;
using eddy::test::sleeper;
using eddy::test::text;
using namespace std::chrono_literals;

namespace {

Task<int> after(std::chrono::milliseconds d, int v) {
    co_await eddy::sleep(d);
    co_return v;
}

}  // namespace

// Declares `mode`: the real clock on the test case's first pass, the paused one on its second.
#define EACH_CLOCK(mode)                          \
    eddy::ClockMode mode = eddy::ClockMode::real; \
    SUBCASE("real clock") {}                      \
    SUBCASE("paused clock") { mode = eddy::ClockMode::paused; }

TEST_CASE("a sleep that ends in time gives its value") {
    EACH_CLOCK(mode);
    Runtime rt(RuntimeConfig{.workers = 2, .clock = mode});
    const auto start = rt.now();
    CHECK(run(rt, eddy::with_timeout(after(5ms, 42), 10s)) == 42);
    CHECK(run(rt, eddy::with_timeout(after(5ms, 43), rt.now() + 10s)) == 43);
    if (mode == eddy::ClockMode::paused) CHECK(rt.now() - start == 10ms);
}

TEST_CASE("a sleep that does not end in time is cancelled, then TimedOut is thrown") {
    EACH_CLOCK(mode);
    Runtime rt(RuntimeConfig{.workers = 2, .clock = mode});
    LifetimeCounter frames;
    std::atomic<int> cancelled{0};
    const auto start = rt.now();
    try {
        (void)run(rt, eddy::with_timeout(sleeper(frames, cancelled), 30ms));
        FAIL("no TimedOut");
    } catch (const TimedOut& e) {
        CHECK(e.code() == std::errc::timed_out);
    }
    const auto took = rt.now() - start;
    CHECK(took >= 30ms);  // timers never fire early
    CHECK(took < 10s);
    if (mode == eddy::ClockMode::paused) CHECK(took == 30ms);
    CHECK(cancelled.load() == 1);
    CHECK(frames.alive() == 0);  // the task had stopped before TimedOut was thrown
}

TEST_CASE("three 100 ms sleeps each under a 1 s timeout finish together in under a second") {
    EACH_CLOCK(mode);
    Runtime rt(RuntimeConfig{.workers = 2, .clock = mode});
    const auto start = rt.now();
    auto [a, b, c] =
        run(rt, eddy::when_all(eddy::with_timeout(after(100ms, 1), 1s), eddy::with_timeout(after(100ms, 2), 1s),
                               eddy::with_timeout(after(100ms, 3), 1s)));
    CHECK(a + b + c == 6);
    CHECK(rt.now() - start < 1s);
    if (mode == eddy::ClockMode::paused) CHECK(rt.now() - start == 100ms);
}

TEST_CASE("a read with no data times out and the socket stays usable") {
    EACH_CLOCK(mode);
    Runtime rt(RuntimeConfig{.workers = 2, .clock = mode});
    const auto start = rt.now();
    run(rt, []() -> Task<void> {
        auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
        Connection c = co_await eddy::test::connect_pair(listener);
        std::array<std::byte, 32> buf{};
        auto read = [](eddy::net::TcpStream& s, std::span<std::byte> b) -> Task<std::size_t> {
            co_return co_await s.read(b);
        };
        CHECK_THROWS_AS(co_await eddy::with_timeout(read(c.server, buf), 20ms), TimedOut);
        co_await c.client.write_all(bytes("after the timeout"));
        const std::size_t n = co_await eddy::with_timeout(read(c.server, buf), 10s);
        CHECK(text(std::span(buf).first(n)) == "after the timeout");
    }());
    // Virtual time: the idle read waited exactly its 20 ms; the written bytes beat the 10 s.
    if (mode == eddy::ClockMode::paused) CHECK(rt.now() - start == 20ms);
}

TEST_CASE("an exception from the task passes through with_timeout") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto failing = []() -> Task<int> {
        co_await eddy::sleep(1ms);
        throw std::runtime_error("inner");
    };
    CHECK_THROWS_WITH_AS(run(rt, eddy::with_timeout(failing(), 10s)), "inner", std::runtime_error);
}

TEST_CASE("with_timeout works for void and reference tasks") {
    Runtime rt(RuntimeConfig{.workers = 1});
    CHECK_NOTHROW(run(rt, eddy::with_timeout([]() -> Task<void> { co_await eddy::sleep(1ms); }(), 10s)));
    int x = 3;
    int& r = run(rt, eddy::with_timeout([](int& v) -> Task<int&> { co_return v; }(x), 10s));
    CHECK(&r == &x);
}

TEST_CASE("an empty task under with_timeout throws BrokenTask") {
    Runtime rt(RuntimeConfig{.workers = 1});
    CHECK_THROWS_AS(run(rt, eddy::with_timeout(Task<int>{}, 1s)), eddy::BrokenTask);
}

TEST_CASE("a task that finishes despite the timeout keeps its value instead of TimedOut") {
    Runtime rt(RuntimeConfig{.workers = 2});
    // Shielded, the task cannot be cancelled: the timer fires first, yet the task's result is
    // returned, never thrown away (for a read, that would lose the bytes it consumed).
    CHECK(run(rt, eddy::with_timeout(eddy::shield(after(50ms, 5)), 5ms)) == 5);
}

TEST_CASE("cancelling the awaiter of with_timeout gives OperationCancelled, not TimedOut") {
    Runtime rt(RuntimeConfig{.workers = 2});
    std::stop_source stop;
    LifetimeCounter frames;
    std::atomic<int> cancelled{0};
    CHECK_THROWS_AS(run(rt, eddy::when_all(eddy::with_stop_token(eddy::with_timeout(sleeper(frames, cancelled), 1h),
                                                                 stop.get_token()),
                                           eddy::test::stop_after(5ms, stop))),
                    OperationCancelled);
    CHECK(cancelled.load() == 1);
}
