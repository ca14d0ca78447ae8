// tests/reactor/cancellation_test.cpp: task-level cancellation (eddy/tasks/cancellation.hpp)
// reaching the reactor: a stop request on a task's token cancels the socket read or sleep it
// (or any task it awaits, however deep) is suspended on; the buffer stays the kernel's until
// its completion; the descriptor stays usable; a completion racing the cancel is delivered
// exactly once; shield, check_cancelled and this_task::stop_token.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <span>
#include <stop_token>
#include <string>
#include <utility>

#include <eddy/eddy.hpp>

#include "support/counted.hpp"
#include "support/net_helpers.hpp"
#include "support/sleeper.hpp"

using eddy::OperationCancelled;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::test::bytes;
using eddy::test::Connection;
using eddy::test::Counted;
using eddy::test::LifetimeCounter;
using eddy::test::run;
using eddy::test::stop_after;
using eddy::test::text;
using namespace std::chrono_literals;

namespace {

/// A chain of `depth` tasks, each awaiting the next; the innermost sleeps for an hour.
/// Every level holds a Counted, so the test sees each frame unwind.
Task<void> chain(int depth, LifetimeCounter& frames) {
    Counted level(frames);
    if (depth == 0) {
        co_await eddy::sleep(1h);
    } else {
        co_await chain(depth - 1, frames);
    }
}

Task<std::size_t> read_into(eddy::net::TcpStream& s, std::span<std::byte> buf) { co_return co_await s.read(buf); }

Task<int> after(std::chrono::milliseconds d, int v) {
    co_await eddy::sleep(d);
    co_return v;
}

}  // namespace

TEST_CASE("a stop request reaches a sleep at the bottom of a 10,000-deep await chain") {
    Runtime rt(RuntimeConfig{.workers = 2});
    LifetimeCounter frames;
    std::stop_source stop;
    CHECK_THROWS_AS(
        run(rt, eddy::when_all(eddy::with_stop_token(chain(10000, frames), stop.get_token()), stop_after(10ms, stop))),
        OperationCancelled);
    CHECK(frames.constructions() == 10001);
    CHECK(frames.alive() == 0);
}

TEST_CASE("after a stop request every suspending operation throws at once") {
    Runtime rt(RuntimeConfig{.workers = 1});
    std::stop_source stop;
    stop.request_stop();
    int caught = 0;
    run(rt, eddy::with_stop_token(
                [](int& n) -> Task<void> {
                    for (int i = 0; i < 3; ++i) {
                        try {
                            co_await eddy::sleep(1h);
                        } catch (const OperationCancelled& e) {
                            CHECK(e.code() == std::errc::operation_canceled);
                            ++n;
                        }
                    }
                }(caught),
                stop.get_token()));
    CHECK(caught == 3);
}

TEST_CASE("a sleep already due completes even under a stopped token") {
    Runtime rt(RuntimeConfig{.workers = 1});
    std::stop_source stop;
    stop.request_stop();
    CHECK_NOTHROW(
        run(rt, eddy::with_stop_token([]() -> Task<void> { co_await eddy::sleep(0ms); }(), stop.get_token())));
}

TEST_CASE("check_cancelled throws only after a stop request; this_task::stop_token sees it") {
    Runtime rt(RuntimeConfig{.workers = 1});
    std::stop_source stop;
    auto body = [](std::stop_source& s) -> Task<int> {
        std::stop_token mine = co_await eddy::this_task::stop_token();
        CHECK(mine.stop_possible());
        CHECK(!mine.stop_requested());
        co_await eddy::this_task::check_cancelled();  // not yet: no throw
        s.request_stop();
        CHECK(mine.stop_requested());
        try {
            co_await eddy::this_task::check_cancelled();
        } catch (const OperationCancelled&) {
            co_return 1;
        }
        co_return 0;
    };
    CHECK(run(rt, eddy::with_stop_token(body(stop), stop.get_token())) == 1);
}

TEST_CASE("a spawned task has no cancellation: its stop_token is empty") {
    Runtime rt(RuntimeConfig{.workers = 1});
    const bool possible = run(rt, []() -> Task<bool> {
        std::stop_token t = co_await eddy::this_task::stop_token();
        co_return t.stop_possible();
    }());
    CHECK(!possible);
}

TEST_CASE("shield lets cleanup run to the end in a cancelled task") {
    Runtime rt(RuntimeConfig{.workers = 2});
    std::stop_source stop;
    std::atomic<bool> cleaned{false};
    auto worker = [](std::atomic<bool>& done) -> Task<void> {
        bool stopped = false;
        try {
            co_await eddy::sleep(1h);
        } catch (const OperationCancelled&) {
            stopped = true;
        }
        CHECK(stopped);
        // Without shield this sleep would throw at once: the task is cancelled.
        co_await eddy::shield([](std::atomic<bool>& d) -> Task<void> {
            std::stop_token t = co_await eddy::this_task::stop_token();
            CHECK(!t.stop_possible());
            co_await eddy::sleep(20ms);
            d.store(true);
        }(done));
        co_await eddy::this_task::check_cancelled();  // and outside the shield, it still is
    };
    CHECK_THROWS_AS(
        run(rt, eddy::when_all(eddy::with_stop_token(worker(cleaned), stop.get_token()), stop_after(10ms, stop))),
        OperationCancelled);
    CHECK(cleaned.load());
}

TEST_CASE("when_any: a loser blocked in a socket read is cancelled and the socket stays usable") {
    Runtime rt(RuntimeConfig{.workers = 2});
    run(rt, []() -> Task<void> {
        auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
        Connection c = co_await eddy::test::connect_pair(listener);
        for (int round = 0; round < 20; ++round) {
            // The loser's buffer is in its own frame: the reactor resumes that frame only
            // after the kernel's completion of the cancelled read (ASan would see a write
            // into a freed frame).
            auto reader = [](eddy::net::TcpStream& s) -> Task<std::size_t> {
                std::array<std::byte, 64> buf{};
                co_return co_await s.read(buf);
            };
            auto r = co_await eddy::when_any(reader(c.server), after(2ms, 7));
            REQUIRE(r.index() == 1);
            CHECK(std::get<1>(r) == 7);
            // Nothing was consumed by the cancelled read: the next bytes arrive whole.
            const std::string msg = "round " + std::to_string(round);
            co_await c.client.write_all(bytes(msg));
            std::array<std::byte, 64> buf{};
            const std::size_t n = co_await c.server.read(buf);
            CHECK(text(std::span(buf).first(n)) == msg);
        }
    }());
}

TEST_CASE("a read cancelled while data races in delivers every byte exactly once") {
    Runtime rt(RuntimeConfig{.workers = 2});
    run(rt, []() -> Task<void> {
        auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
        Connection c = co_await eddy::test::connect_pair(listener);
        std::size_t sent = 0;
        std::size_t received = 0;
        for (int round = 0; round < 300; ++round) {
            std::stop_source stop;
            std::array<std::byte, 16> buf{};
            // The reader, the write and the stop race on the two workers.
            auto [got, ignored1, ignored2] = co_await eddy::when_all(
                [](eddy::net::TcpStream& s, std::span<std::byte> b, std::stop_token t) -> Task<std::size_t> {
                    try {
                        co_return co_await eddy::with_stop_token(read_into(s, b), t);
                    } catch (const OperationCancelled&) {
                        co_return 0;
                    }
                }(c.server, buf, stop.get_token()),
                [](eddy::net::TcpStream& s) -> Task<std::size_t> { co_return co_await s.write(bytes("x")); }(c.client),
                [](std::stop_source& s) -> Task<void> {
                    s.request_stop();
                    co_return;
                }(stop));
            (void)ignored1;
            (void)ignored2;
            sent += 1;
            received += got;
        }
        // What the cancelled reads did not take is still in the socket, in full.
        c.client.shutdown(eddy::net::TcpStream::Shutdown::kWrite);
        received += (co_await eddy::test::read_to_end(c.server)).size();
        CHECK(received == sent);
    }());
}
