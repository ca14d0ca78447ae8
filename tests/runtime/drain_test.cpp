// tests/runtime/drain_test.cpp: Runtime::shutdown_gracefully (the drain and its report) and
// TaskTracker (spawn, close, wait, len), alone and together.
//
// Counts, not timing: a task that must still be running when the drain begins waits for a
// gate that the test opens only once the drain has begun, which it sees when a spawn from
// outside is refused. "Stuck" is an hour's sleep; deadlines are short only where they must
// pass, graces and waits are wide (eddy::test::kDeadline).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/task_tracker.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>
#include <eddy/time/sleep.hpp>

#include "support/counted.hpp"
#include "support/waiting.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::ShutdownReport;
using eddy::Task;
using eddy::TaskTracker;
using eddy::test::Counted;
using eddy::test::kDeadline;
using eddy::test::LifetimeCounter;
using eddy::test::past;
using namespace std::chrono_literals;

namespace {

Task<void> noop() { co_return; }

/// Yields until `gate` opens (a task that must still run when the drain begins).
Task<void> wait_gate(const std::atomic<bool>& gate, std::atomic<int>& done) {
    while (!gate.load()) co_await eddy::yield_now();
    done.fetch_add(1);
}

/// Sleeps an hour, holding a guard; counts an OperationCancelled before rethrowing it.
Task<void> stuck(LifetimeCounter& guards, std::atomic<int>& cancelled) {
    Counted guard(guards);
    try {
        co_await eddy::sleep(1h);
    } catch (const eddy::OperationCancelled&) {
        cancelled.fetch_add(1);
        throw;
    }
}

/// Stuck tasks and what they count.
struct Stuck {
    LifetimeCounter guards;
    std::atomic<int> cancelled{0};
    TaskTracker tracker;
    Task<void> make() { return stuck(guards, cancelled); }
};

/// Until a spawn from outside is refused: the drain has begun (closed its door). The probes
/// that got in are noops: they finish before or during the drain.
void wait_until_refused(Runtime& rt) {
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    for (;;) {
        try {
            (void)rt.spawn(noop());
        } catch (const eddy::RuntimeStopped&) {
            return;
        }
        if (past(deadline)) FAIL("a spawn from outside was still accepted: the drain did not begin");
        std::this_thread::yield();
    }
}

/// Polls `f` until it is true or kDeadline passes.
template <class F>
bool eventually(F f) {
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (!f()) {
        if (past(deadline)) return false;
        std::this_thread::yield();
    }
    return true;
}

/// Runs the drain on a thread of its own; the test opens gates meanwhile.
std::future<ShutdownReport> drain_async(Runtime& rt, std::chrono::nanoseconds deadline,
                                        std::chrono::nanoseconds grace = kDeadline) {
    return std::async(std::launch::async, [&rt, deadline, grace] { return rt.shutdown_gracefully(deadline, grace); });
}

}  // namespace

TEST_CASE("tasks that finish within the deadline are reported finished, none cancelled") {
    Runtime rt(RuntimeConfig{.workers = 2});
    std::atomic<bool> gate{false};
    std::atomic<int> done{0};
    for (int i = 0; i < 10; ++i) (void)rt.spawn(wait_gate(gate, done), "worker-" + std::to_string(i));
    auto report = drain_async(rt, kDeadline);
    wait_until_refused(rt);
    gate.store(true);
    const ShutdownReport r = report.get();
    CHECK(done.load() == 10);
    CHECK(r.finished >= 10);  // and the probes that got in before the door closed
    CHECK(r.cancelled == 0);
    CHECK(r.cancelled_names.empty());
    CHECK(r.destroyed == 0);
    CHECK(r.clean());
}

TEST_CASE("a stuck task is cancelled and unwinds, a plain one destroyed, both named") {
    Runtime rt(RuntimeConfig{.workers = 2});
    Stuck s;
    s.tracker.spawn_on(rt, s.make(), "stuck-abortable");
    (void)rt.spawn(s.make(), "stuck-plain");  // uncancellable: destroyed
    (void)rt.spawn(s.make());                 // unnamed: only counted
    REQUIRE(eventually([&] { return s.guards.alive() == 3; }));
    const ShutdownReport r = rt.shutdown_gracefully(20ms, kDeadline);
    CHECK(r.cancelled == 3);
    CHECK(r.cancelled_names == std::vector<std::string>{"stuck-abortable", "stuck-plain"});
    CHECK(r.destroyed == 2);
    CHECK(!r.clean());
    CHECK(s.cancelled.load() == 1);  // only the abortable one saw OperationCancelled
    CHECK(s.guards.alive() == 0);    // every guard's destructor ran
    CHECK(s.tracker.len() == 0);
}

TEST_CASE("a deadline of zero is shutdown() with a report: nothing is asked to stop") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Stuck s;
    s.tracker.spawn_on(rt, s.make(), "stuck");
    REQUIRE(eventually([&] { return s.guards.alive() == 1; }));
    const ShutdownReport r = rt.shutdown_gracefully(0ns);
    CHECK(r.cancelled == 1);
    CHECK(r.cancelled_names == std::vector<std::string>{"stuck"});
    CHECK(r.destroyed == 1);
    CHECK(s.cancelled.load() == 0);
    CHECK(s.guards.alive() == 0);
}

TEST_CASE("spawns during and after the drain") {
    Runtime rt(RuntimeConfig{.workers = 2});
    std::atomic<bool> gate{false};
    std::atomic<int> done{0};
    std::atomic<int> children{0};
    auto parent = [](const std::atomic<bool>& g, std::atomic<int>& d, std::atomic<int>& c) -> Task<void> {
        co_await wait_gate(g, d);
        // A task finishing its work during the drain may still spawn (and the child runs).
        co_await eddy::spawn(wait_gate(g, c));
    };
    (void)rt.spawn(parent(gate, done, children));
    auto report = drain_async(rt, kDeadline);
    wait_until_refused(rt);
    CHECK_THROWS_AS((void)rt.spawn(noop()), eddy::RuntimeStopped);  // from outside: refused
    gate.store(true);
    const ShutdownReport r = report.get();
    CHECK(children.load() == 1);
    CHECK(r.finished >= 2);
    CHECK(r.clean());
    CHECK_THROWS_AS((void)rt.spawn(noop()), eddy::RuntimeStopped);  // after: refused
    const ShutdownReport again = rt.shutdown_gracefully(1s);        // idempotent: zeros
    CHECK(again.finished == 0);
    CHECK(again.cancelled == 0);
    CHECK(again.destroyed == 0);
    rt.shutdown();  // and shutdown() after it does nothing
}

TEST_CASE("shutdown_gracefully refuses a worker thread and negative durations") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto from_worker = []() -> Task<bool> {
        try {
            (void)Runtime::current().shutdown_gracefully(1s);
        } catch (const eddy::WrongThread&) {
            co_return true;
        }
        co_return false;
    };
    CHECK(rt.block_on(from_worker()));
    CHECK_THROWS_AS((void)rt.shutdown_gracefully(-1ns), std::invalid_argument);
    CHECK_THROWS_AS((void)rt.shutdown_gracefully(1s, -1ns), std::invalid_argument);
    CHECK(rt.shutdown_gracefully(1s).clean());  // still running: the bad calls changed nothing
}

TEST_CASE("TaskTracker: len, close, reopen, and wait once closed and empty") {
    Runtime rt(RuntimeConfig{.workers = 2});
    TaskTracker tracker;
    CHECK(tracker.len() == 0);
    CHECK(tracker.is_empty());
    CHECK(!tracker.is_closed());
    std::atomic<bool> gate{false};
    std::atomic<int> done{0};
    std::atomic<bool> waited{false};
    auto waiter = [](TaskTracker t, std::atomic<bool>& w) -> Task<void> {
        co_await t.wait();
        w.store(true);
    };
    auto start = [&]() -> Task<void> {
        for (int i = 0; i < 3; ++i) tracker.spawn(wait_gate(gate, done));
        CHECK(tracker.len() == 3);  // counted at spawn
        co_return;
    };
    rt.block_on(start());
    (void)rt.spawn(waiter(tracker, waited));  // a copy shares the tracker
    gate.store(true);
    REQUIRE(eventually([&] { return tracker.len() == 0; }));
    CHECK(done.load() == 3);
    for (int i = 0; i < 100; ++i) std::this_thread::yield();
    CHECK(!waited.load());  // empty but open: wait() goes on
    CHECK(tracker.close());
    CHECK(!tracker.close());  // already closed
    CHECK(tracker.is_closed());
    CHECK(eventually([&] { return waited.load(); }));
    rt.block_on(tracker.wait());  // closed and empty: at once
    CHECK(tracker.reopen());
    CHECK(!tracker.is_closed());
    CHECK_THROWS_AS(tracker.spawn(noop()), eddy::WrongThread);  // off a worker: spawn_on
    CHECK_THROWS_AS(tracker.spawn_on(rt, Task<void>()), eddy::BrokenTask);
    CHECK(tracker.len() == 0);
}

TEST_CASE("a drain waits for a task that waits on a tracker; the deadline cancels its members") {
    LifetimeCounter guards;
    std::atomic<int> cancelled{0};
    std::atomic<int> done{0};
    std::atomic<bool> gate{false};
    auto serve = [](TaskTracker t, const std::atomic<bool>& g, std::atomic<int>& d) -> Task<void> {
        for (int i = 0; i < 4; ++i) t.spawn(wait_gate(g, d), "request");
        t.close();
        co_await t.wait();  // the drain waits for this task, so for the tracker
        d.fetch_add(1);
    };
    SUBCASE("finished within the deadline") {
        Runtime rt(RuntimeConfig{.workers = 2});
        TaskTracker tracker;
        (void)rt.spawn(serve(tracker, gate, done), "server");
        REQUIRE(eventually([&] { return tracker.len() == 4; }));
        auto report = drain_async(rt, kDeadline);
        wait_until_refused(rt);
        gate.store(true);
        const ShutdownReport r = report.get();
        CHECK(done.load() == 5);
        CHECK(r.finished >= 5);
        CHECK(r.clean());
    }
    SUBCASE("stuck members are cancelled at the deadline, and the waiter ends with them") {
        Runtime rt(RuntimeConfig{.workers = 2});
        TaskTracker tracker;
        tracker.spawn_on(rt, stuck(guards, cancelled), "stuck-member");
        tracker.close();
        (void)rt.spawn(
            [](TaskTracker t, std::atomic<int>& d) -> Task<void> {
                co_await t.wait();
                d.fetch_add(1);
            }(tracker, done),
            "waiter");
        REQUIRE(eventually([&] { return guards.alive() == 1; }));
        const ShutdownReport r = rt.shutdown_gracefully(20ms, kDeadline);
        CHECK(r.cancelled == 2);
        CHECK(r.cancelled_names == std::vector<std::string>{"stuck-member", "waiter"});
        CHECK(cancelled.load() == 1);
        CHECK(guards.alive() == 0);
        CHECK(tracker.len() == 0);
    }
}
