// tests/time/virtual_clock_test.cpp: virtual time (RuntimeConfig::clock = ClockMode::paused or
// manual; eddy/runtime/time.hpp). A manual clock stands still until advance(); advance fires
// timers in deadline order, one step at a time, and the woken tasks see the clock at their
// deadline; a paused clock jumps to the next timer only when the runtime is quiet (not while a
// task is runnable or a blocking call runs); real pipe I/O mixes with virtual sleeps; many
// workers; with_timeout and Interval on virtual time; misuse errors; shutdown with virtual
// timers and advances pending.
//
// Virtual times are asserted exactly (they are deterministic). Real time is only bounded
// generously from above ("a 30 s sleep finishes in under 5 s") or waited for with kDeadline.
#include <doctest/doctest.h>

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <span>
#include <utility>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include <eddy/time/interval.hpp>
#include <eddy/io/pipe.hpp>
#include <eddy/io/read_write.hpp>
#include <eddy/time/sleep.hpp>
#include <eddy/time/with_timeout.hpp>
#include <eddy/net/unix_stream.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/spawn_blocking.hpp>
#include <eddy/runtime/this_worker.hpp>
#include <eddy/runtime/time.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/io_helpers.hpp"
#include "support/waiting.hpp"
#include "support/watchdog.hpp"

using eddy::ClockMode;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

RuntimeConfig config(ClockMode mode, std::size_t workers = 2) {
    return RuntimeConfig{.workers = workers, .clock = mode};
}

/// Sleeps for `d`, then records how far the runtime's clock is from `t0`.
Task<Clock::duration> sleep_and_read(Clock::duration d, Clock::time_point t0) {
    co_await eddy::sleep(d);
    co_return eddy::time::now() - t0;
}

/// Sleeps for `d`, then takes the next number of `order` and records when (clock - t0).
Task<void> sleep_in_order(Clock::duration d, Clock::time_point t0, std::atomic<int>& order, int& rank,
                          Clock::duration& at) {
    co_await eddy::sleep(d);
    rank = order.fetch_add(1);
    at = eddy::time::now() - t0;
}

/// Awaits `h` from the test thread (through a task, as JoinHandle::wait is block_on's).
template <class T>
T join(Runtime& rt, eddy::JoinHandle<T> h) {
    return rt.block_on(
        [](eddy::JoinHandle<T> handle) -> Task<T> { co_return co_await std::move(handle); }(std::move(h)));
}

Task<void> sleep_task(Clock::duration d) { co_await eddy::sleep(d); }

constexpr auto kGenerous = 5s;  // a real-time upper bound no virtual test comes near

}  // namespace

TEST_CASE("a manual clock stands still until advance(); then the sleep fires and sees the new time") {
    Runtime rt(config(ClockMode::manual));
    CHECK(rt.clock_is_virtual());
    const auto t0 = rt.now();
    auto h = rt.spawn(sleep_and_read(1s, t0));
    std::this_thread::sleep_for(100ms);  // real time passes; virtual time does not
    CHECK_FALSE(h.is_finished());
    CHECK(rt.now() == t0);
    rt.advance(999ms);
    CHECK_FALSE(h.is_finished());
    CHECK(rt.now() - t0 == 999ms);
    rt.advance(1ms);
    CHECK(h.is_finished());  // advance returns after the woken task ran
    CHECK(join(rt, std::move(h)) == 1s);
    CHECK(rt.now() - t0 == 1s);
}

TEST_CASE("the virtual clock starts at the real time the runtime was built; off a worker now() is real") {
    const auto before = Clock::now();
    Runtime rt(config(ClockMode::manual));
    const auto after = Clock::now();
    CHECK(rt.now() >= before);
    CHECK(rt.now() <= after);
    rt.advance(1h);
    CHECK(eddy::time::now() < rt.now());  // the test thread reads steady_clock
    CHECK_FALSE(eddy::time::is_virtual());
    CHECK(rt.block_on([]() -> Task<bool> { co_return eddy::time::is_virtual(); }()));
    const auto inside = rt.block_on([]() -> Task<Clock::time_point> { co_return eddy::time::now(); }());
    CHECK(inside == rt.now());
}

TEST_CASE("advance fires every due timer in deadline order, each task seeing its own deadline") {
    Runtime rt(config(ClockMode::manual, 4));
    const auto t0 = rt.now();
    std::atomic<int> order{0};
    constexpr int kTimers = 12;
    std::vector<int> rank(kTimers, -1);
    std::vector<Clock::duration> at(kTimers);
    std::vector<eddy::JoinHandle<void>> hs;
    // Spawned in a scrambled order, from outside (they land on several workers).
    for (int k = 0; k < kTimers; ++k) {
        const int i = (k * 5) % kTimers;
        hs.push_back(rt.spawn(sleep_in_order(std::chrono::milliseconds(10 * (i + 1)), t0, order, rank[i], at[i])));
    }
    // A chain: two 50 ms sleeps in a row also finish inside one advance.
    auto chain = rt.spawn([](Clock::time_point start) -> Task<Clock::duration> {
        co_await eddy::sleep(50ms);
        co_await eddy::sleep(50ms);
        co_return eddy::time::now() - start;
    }(t0));
    std::this_thread::sleep_for(50ms);  // let every task arm its timer
    rt.advance(10 * kTimers * 1ms);
    for (int i = 0; i < kTimers; ++i) {
        CHECK(rank[i] == i);
        CHECK(at[i] == std::chrono::milliseconds(10 * (i + 1)));
    }
    CHECK(chain.is_finished());
    CHECK(join(rt, std::move(chain)) == 100ms);
    for (auto& h : hs) join(rt, std::move(h));
}

TEST_CASE("co_await eddy::time::advance from a task: the timers it passes fire first") {
    Runtime rt(config(ClockMode::manual));
    const auto [fired_at, end] = rt.block_on([]() -> Task<std::pair<Clock::duration, Clock::duration>> {
        const auto t0 = eddy::time::now();
        auto sleeper = eddy::spawn(sleep_and_read(30ms, t0));
        co_await eddy::time::advance(100ms);
        CHECK(sleeper.is_finished());
        const auto fired = co_await sleeper;
        co_return std::pair{fired, eddy::time::now() - t0};
    }());
    CHECK(fired_at == 30ms);
    CHECK(end == 100ms);
}

TEST_CASE("a paused clock auto-advances: a 30 s sleep takes well under a second of real time") {
    Runtime rt(config(ClockMode::paused));
    const auto real0 = Clock::now();
    const auto t0 = rt.now();
    CHECK(rt.block_on(sleep_and_read(30s, t0)) == 30s);
    CHECK(rt.now() - t0 == 30s);
    CHECK(Clock::now() - real0 < kGenerous);
    // Nothing pending: the clock stays.
    std::this_thread::sleep_for(20ms);
    CHECK(rt.now() - t0 == 30s);
}

TEST_CASE("auto-advance waits while a task is runnable") {
    // Everything from one block_on: between two spawns from outside the runtime may be quiet,
    // and the clock may jump there (eddy/runtime/time.hpp).
    Runtime rt(config(ClockMode::paused));
    const auto t0 = rt.now();
    std::atomic<bool> fired{false};
    const bool moved = rt.block_on([](std::atomic<bool>& woke, Clock::time_point start) -> Task<bool> {
        auto sleeper = eddy::spawn([](std::atomic<bool>& flag) -> Task<void> {
            co_await eddy::sleep(10s);
            flag = true;
        }(woke));
        // Runnable for 200 ms of real time: the clock must not move meanwhile.
        bool jumped = false;
        const auto until = Clock::now() + 200ms;
        while (Clock::now() < until) {
            jumped = jumped || woke.load() || eddy::time::now() != start;
            co_await eddy::yield_now();
        }
        co_await sleeper;  // then it jumps
        co_return jumped;
    }(fired, t0));
    CHECK_FALSE(moved);
    CHECK(fired.load());
    CHECK(rt.now() - t0 == 10s);
}

TEST_CASE("auto-advance waits while a blocking call runs") {
    Runtime rt(config(ClockMode::paused));
    const auto t0 = rt.now();
    std::atomic<bool> fired{false};
    const bool fired_during = rt.block_on([](std::atomic<bool>& woke) -> Task<bool> {
        auto sleeper = eddy::spawn([](std::atomic<bool>& flag) -> Task<void> {
            co_await eddy::sleep(10s);
            flag = true;
        }(woke));
        const bool during = co_await eddy::spawn_blocking([&woke] {
            std::this_thread::sleep_for(200ms);
            return woke.load();
        });
        co_await sleeper;
        co_return during;
    }(fired));
    CHECK_FALSE(fired_during);
    CHECK(fired.load());
    CHECK(rt.now() - t0 == 10s);
}

TEST_CASE("virtual sleeps and real pipe I/O: data written after a sleep beats a longer timeout; no data times out") {
    Runtime rt(config(ClockMode::paused));
    SUBCASE("a writer that sleeps 5 s, a reader with a 30 s timeout") {
        auto [rd, wr] = eddy::io::pipe();
        const auto got = rt.block_on([](int rfd, int wfd) -> Task<std::pair<std::size_t, Clock::duration>> {
            const auto t0 = eddy::time::now();
            auto writer = eddy::spawn([](int fd) -> Task<void> {
                co_await eddy::sleep(5s);
                const std::byte b[3]{std::byte{'a'}, std::byte{'b'}, std::byte{'c'}};
                co_await eddy::test::write_all(fd, b);
            }(wfd));
            std::byte buf[8];
            const std::size_t n = co_await eddy::with_timeout(
                [](int fd, std::span<std::byte> buffer) -> Task<std::size_t> {
                    co_return co_await eddy::io::read(fd, buffer);
                }(rfd, buf),
                30s);
            co_await writer;
            co_return std::pair{n, eddy::time::now() - t0};
        }(rd.get(), wr.get()));
        CHECK(got.first == 3);
        CHECK(got.second == 5s);
    }
    SUBCASE("a read with nothing coming times out after exactly 30 virtual seconds") {
        auto [rd, wr] = eddy::io::pipe();
        const auto real0 = Clock::now();
        const auto t0 = rt.now();
        CHECK_THROWS_AS(rt.block_on([](int rfd) -> Task<std::size_t> {
            std::byte buf[8];
            co_return co_await eddy::with_timeout(
                [](int fd, std::span<std::byte> buffer) -> Task<std::size_t> {
                    co_return co_await eddy::io::read(fd, buffer);
                }(rfd, buf),
                30s);
        }(rd.get())),
                        eddy::TimedOut);
        CHECK(rt.now() - t0 == 30s);
        CHECK(Clock::now() - real0 < kGenerous);
    }
}

TEST_CASE("many workers, timers armed on each: every one fires at its deadline, in order") {
    Runtime rt(config(ClockMode::paused, 4));
    const auto t0 = rt.now();
    constexpr int kTimers = 64;
    std::atomic<int> order{0};
    std::vector<int> rank(kTimers, -1);
    std::vector<Clock::duration> at(kTimers);
    std::mutex workers_lock;
    std::set<std::size_t> workers;
    rt.block_on([&]() -> Task<void> {
        std::vector<eddy::JoinHandle<void>> hs;
        for (int k = 0; k < kTimers; ++k) {
            const int i = (k * 37) % kTimers;  // scrambled
            hs.push_back(eddy::spawn([](int index, Clock::time_point start, std::atomic<int>& next, int& place,
                                        Clock::duration& when, std::mutex& m, std::set<std::size_t>& ws) -> Task<void> {
                co_await eddy::yield_now();  // let thieves take some
                {
                    std::lock_guard lock(m);
                    ws.insert(eddy::this_worker::index().value_or(99));
                }
                co_await sleep_in_order(std::chrono::milliseconds(100 * (index + 1)), start, next, place, when);
            }(i, t0, order, rank[i], at[i], workers_lock, workers)));
        }
        for (auto& h : hs) co_await h;
    }());
    INFO("workers that armed timers: " << workers.size());
    for (int i = 0; i < kTimers; ++i) {
        CHECK(rank[i] == i);
        CHECK(at[i] == std::chrono::milliseconds(100 * (i + 1)));
    }
    CHECK(rt.now() - t0 == std::chrono::milliseconds(100 * kTimers));
}

TEST_CASE("with_timeout in virtual time: exactly at the limit, or the task's own time") {
    Runtime rt(config(ClockMode::paused));
    const auto t0 = rt.now();
    CHECK_THROWS_AS(rt.block_on(eddy::with_timeout(sleep_task(1h), 30s)), eddy::TimedOut);
    CHECK(rt.now() - t0 == 30s);
    rt.block_on(eddy::with_timeout(sleep_task(1s), 30s));
    CHECK(rt.now() - t0 == 31s);  // the disarmed 30 s timer does not move the clock
    std::this_thread::sleep_for(20ms);
    CHECK(rt.now() - t0 == 31s);
}

TEST_CASE("an Interval under a manual clock ticks exactly once per period") {
    Runtime rt(config(ClockMode::manual));
    std::atomic<int> ticks{0};
    std::atomic<bool> stop{false};
    auto h = rt.spawn([](std::atomic<int>& count, std::atomic<bool>& halt) -> Task<void> {
        auto every = eddy::interval(100ms);
        const auto t0 = eddy::time::now();
        while (!halt) {
            const auto at = co_await every.tick();
            CHECK(at - t0 == count.load() * 100ms);  // the tick's time point
            CHECK(eddy::time::now() == at);          // taken exactly then
            ++count;
        }
    }(ticks, stop));
    REQUIRE(eddy::test::wait_count(ticks, 1));  // the first tick is due at once
    rt.advance(1s);
    CHECK(ticks == 11);
    rt.advance(250ms);
    CHECK(ticks == 13);
    stop = true;
    rt.advance(50ms);
    CHECK(ticks == 14);  // the tick at 1.3 s sees stop
    CHECK(h.is_finished());
}

TEST_CASE("misuse: advance on a real clock, a negative duration, from the runtime's own worker") {
    SUBCASE("a real clock: std::logic_error, from outside and from a task") {
        Runtime rt(config(ClockMode::real));
        CHECK_FALSE(rt.clock_is_virtual());
        CHECK_THROWS_AS(rt.advance(1s), std::logic_error);
        CHECK_THROWS_AS(rt.block_on([]() -> Task<void> { co_await eddy::time::advance(1s); }()), std::logic_error);
        CHECK_FALSE(rt.block_on([]() -> Task<bool> { co_return eddy::time::is_virtual(); }()));
    }
    SUBCASE("a negative duration: std::invalid_argument, from outside and from a task") {
        Runtime rt(config(ClockMode::manual));
        const auto t0 = rt.now();
        CHECK_THROWS_AS(rt.advance(-1ns), std::invalid_argument);
        CHECK_THROWS_AS(rt.block_on([]() -> Task<void> { co_await eddy::time::advance(-1s); }()),
                        std::invalid_argument);
        CHECK(rt.now() == t0);
        rt.advance(0s);  // zero is fine
        CHECK(rt.now() == t0);
    }
    SUBCASE("Runtime::advance from one of its workers: WrongThread") {
        Runtime rt(config(ClockMode::manual));
        CHECK_THROWS_AS(rt.block_on([](Runtime& runtime) -> Task<void> {
            runtime.advance(1s);
            co_return;
        }(rt)),
                        eddy::WrongThread);
    }
    SUBCASE("after shutdown: RuntimeStopped") {
        Runtime rt(config(ClockMode::manual));
        rt.shutdown();
        CHECK_THROWS_AS(rt.advance(1s), eddy::RuntimeStopped);
    }
    SUBCASE("EDDY_CLOCK") {
        ::setenv("EDDY_CLOCK", "paused", 1);
        CHECK(RuntimeConfig::from_env().clock == ClockMode::paused);
        ::setenv("EDDY_CLOCK", "sometimes", 1);
        CHECK_THROWS_AS(RuntimeConfig::from_env(), std::invalid_argument);
        ::unsetenv("EDDY_CLOCK");
        CHECK(RuntimeConfig::from_env().clock == ClockMode::real);
    }
}

TEST_CASE("shutdown with virtual timers pending, and with a thread waiting in advance") {
    SUBCASE("sleepers and a task in advance are destroyed by shutdown") {
        std::optional<Runtime> rt(std::in_place, config(ClockMode::manual));
        std::atomic<bool> spin{true};
        auto sleeper = rt->spawn(sleep_task(1h));
        // A task that never lets the runtime be quiet, so the advancing task never returns.
        auto busy = rt->spawn([](std::atomic<bool>& spinning) -> Task<void> {
            while (spinning) co_await eddy::yield_now();
        }(spin));
        auto advancer = rt->spawn([]() -> Task<void> { co_await eddy::time::advance(2h); }());
        std::this_thread::sleep_for(50ms);
        rt->shutdown();
        CHECK(sleeper.is_finished());
        CHECK(advancer.is_finished());
        CHECK(busy.is_finished());
        rt.reset();
    }
    SUBCASE("a thread in Runtime::advance gets RuntimeStopped") {
        Runtime rt(config(ClockMode::manual));
        std::atomic<bool> spin{true};
        auto busy = rt.spawn([](std::atomic<bool>& spinning) -> Task<void> {
            while (spinning) co_await eddy::yield_now();
        }(spin));
        std::atomic<int> outcome{0};
        std::thread t([&] {
            try {
                rt.advance(1s);
                outcome = 1;
            } catch (const eddy::RuntimeStopped&) {
                outcome = 2;
            }
        });
        std::this_thread::sleep_for(50ms);
        CHECK(outcome == 0);  // held back by the busy task
        rt.shutdown();
        t.join();
        CHECK(outcome == 2);
    }
}

// The reactor, stepping the virtual clock, took every completion the kernel had, and with them
// the read of its wake-up eventfd that shutdown() had just written; it then slept with no
// wake-up armed, and ~Runtime waited for it forever. A write cancelled on a full socket, the
// socket closed just before the runtime goes, made that window wide: it hung within a few
// rounds.
TEST_CASE("a paused runtime shuts down after a cancelled socket write, round after round") {
    for (int round = 0; round < 100; ++round) {
        eddy::test::Watchdog watchdog("time/virtual_clock", "~Runtime after a cancelled socket write", 30s);
        Runtime rt(config(ClockMode::paused));
        std::optional<std::pair<eddy::net::UnixStream, eddy::net::UnixStream>> ends = eddy::net::UnixStream::pair();
        rt.block_on([](eddy::net::UnixStream& s) -> Task<void> {
            const std::vector<char> fill(16384, 'f');
            while (::send(s.native_handle(), fill.data(), fill.size(), MSG_DONTWAIT | MSG_NOSIGNAL) > 0) {
            }
            const std::optional<std::size_t> n = co_await eddy::timeout_or(s.write(std::as_bytes(std::span(fill))), 1s);
            CHECK_FALSE(n.has_value());
        }(ends->first));
        ends.reset();
    }
}
