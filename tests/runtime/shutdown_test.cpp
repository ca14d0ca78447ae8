// tests/runtime/shutdown_test.cpp: Runtime::shutdown and ~Runtime with work still pending:
// nothing hangs, every unfinished frame is destroyed exactly once (counted), no task runs
// afterwards, and whoever waits for such a task hears RuntimeStopped.
//
// "Never finishes" is a task that awaits the JoinHandle of `forever()`, which yields in a
// loop; waiting for a task to reach a point is a bounded poll on an atomic counter. A task
// that must still be running when shutdown begins spins on Scheduler::stopping() (white-box).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "scheduler.hpp"
#include "worker.hpp"

#include "support/counted.hpp"
#include "support/waiting.hpp"

using eddy::JoinHandle;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::test::Counted;
using eddy::test::LifetimeCounter;
using eddy::test::kDeadline;
using eddy::test::past;
using namespace std::chrono_literals;

namespace {

/// Polls until `n` reaches `target` or the deadline passes; true if it did.
bool wait_count(const std::atomic<int>& n, int target) {
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (n.load() < target) {
        if (past(deadline)) return false;
        std::this_thread::yield();
    }
    return true;
}

/// True once shutdown() has asked this worker's runtime to stop (white-box).
bool runtime_stopping() { return eddy::detail::current_worker()->scheduler().stopping(); }

/// Never finishes; keeps a worker busy between its yields.
Task<void> forever(Counted c) {
    (void)c;
    for (;;) co_await eddy::yield_now();
}

/// Counts itself in `reached`, then awaits `h` (which never finishes); counts `resumed` after.
Task<void> await_handle(Counted c, JoinHandle<void> h, std::atomic<int>& reached, std::atomic<int>& resumed) {
    (void)c;
    reached.fetch_add(1);
    co_await std::move(h);
    resumed.fetch_add(1);
}

/// Spawns a never-finishing task and awaits it: never finishes.
Task<void> await_forever(Counted c, std::atomic<int>& reached, std::atomic<int>& resumed) {
    JoinHandle<void> h = eddy::spawn(forever(c));
    reached.fetch_add(1);
    co_await std::move(h);
    resumed.fetch_add(1);
}

/// Awaits a plain child task that never finishes: the child frame is owned by this frame.
Task<void> await_child(Counted c, std::atomic<int>& reached, std::atomic<int>& resumed) {
    co_await await_forever(c, reached, resumed);
    resumed.fetch_add(1);
}

/// Awaits a when_all of two children that never finish.
Task<void> await_when_all(Counted c, std::atomic<int>& reached, std::atomic<int>& resumed) {
    co_await eddy::when_all(await_forever(c, reached, resumed), await_forever(c, reached, resumed));
    resumed.fetch_add(1);
}

Task<void> count_run(Counted c, std::atomic<int>& ran) {
    (void)c;
    ran.fetch_add(1);
    co_return;
}

/// Signals `started`, then spins until shutdown begins (bounded), then ends with 5.
Task<int> finish_during_shutdown(std::promise<void>& started) {
    started.set_value();
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (!runtime_stopping())
        if (past(deadline)) co_return -1;
    co_return 5;
}

/// Signals `started`, spins until shutdown begins (bounded), then suspends: it must never
/// be resumed, only destroyed.
Task<int> suspend_during_shutdown(Counted c, std::promise<void>& started, std::atomic<int>& resumed) {
    (void)c;
    started.set_value();
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (!runtime_stopping() && !past(deadline)) {
    }
    co_await eddy::yield_now();
    resumed.fetch_add(1);
    co_return 1;
}

/// Signals `started`, then spins until shutdown begins (bounded).
Task<void> block_until_shutdown(std::promise<void>& started) {
    started.set_value();
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (!runtime_stopping() && !past(deadline)) {
    }
    co_return;
}

template <class T>
Task<T> join(JoinHandle<T> h) {
    co_return co_await std::move(h);
}

enum class JoinOutcome { value, runtime_stopped, other_exception };
template <class T>
Task<JoinOutcome> join_outcome(JoinHandle<T> h) {
    try {
        (void)co_await std::move(h);
    } catch (const eddy::RuntimeStopped&) {
        co_return JoinOutcome::runtime_stopped;
    } catch (...) {
        co_return JoinOutcome::other_exception;
    }
    co_return JoinOutcome::value;
}

}  // namespace

TEST_SUITE("runtime/shutdown") {

// ---------------------------------------------------------------------------------------------
// Unfinished tasks are destroyed

TEST_CASE("destroying a runtime destroys a task that awaits a never-finishing task's handle") {
    LifetimeCounter counter;
    std::atomic<int> reached{0};
    std::atomic<int> resumed{0};
    {
        Runtime rt(RuntimeConfig{.workers = 2});
        JoinHandle<void> never = rt.spawn(forever(Counted(counter)));
        rt.spawn(await_handle(Counted(counter), std::move(never), reached, resumed)).detach();
        REQUIRE(wait_count(reached, 1));
        CHECK(counter.alive() == 2);
    }
    CHECK(resumed.load() == 0);
    CHECK(counter.alive() == 0);
}

TEST_CASE("destroying a runtime destroys a chain of tasks each awaiting the next one's handle") {
    constexpr int kChain = 100;
    LifetimeCounter counter;
    std::atomic<int> reached{0};
    std::atomic<int> resumed{0};
    {
        JoinHandle<void> last;  // outlives rt: the last task is cancelled while its handle lives
        Runtime rt(RuntimeConfig{.workers = 2});
        JoinHandle<void> next = rt.spawn(forever(Counted(counter)));
        for (int i = 0; i < kChain; ++i)
            next = rt.spawn(await_handle(Counted(counter, i), std::move(next), reached, resumed));
        last = std::move(next);
        REQUIRE(wait_count(reached, kChain));
    }
    CHECK(resumed.load() == 0);
    CHECK(counter.alive() == 0);
}

TEST_CASE("destroying a runtime destroys queued tasks that never started") {
    LifetimeCounter counter;
    std::atomic<int> ran{0};
    std::promise<void> started;
    {
        Runtime rt(RuntimeConfig{.workers = 1});
        rt.spawn(block_until_shutdown(started)).detach();
        REQUIRE(started.get_future().wait_for(kDeadline) == std::future_status::ready);
        // The only worker spins until shutdown: these stay queued until the end.
        for (int i = 0; i < 100; ++i) rt.spawn(count_run(Counted(counter, i), ran)).detach();
    }
    CHECK(ran.load() == 0);
    CHECK(counter.constructions() > 0);
    CHECK(counter.alive() == 0);
}

TEST_CASE("destroying a runtime destroys the awaited child tasks of unfinished tasks") {
    LifetimeCounter counter;
    std::atomic<int> reached{0};
    std::atomic<int> resumed{0};
    {
        Runtime rt(RuntimeConfig{.workers = 2});
        rt.spawn(await_child(Counted(counter), reached, resumed)).detach();
        REQUIRE(wait_count(reached, 1));
    }
    CHECK(resumed.load() == 0);
    CHECK(counter.alive() == 0);
}

TEST_CASE("destroying a runtime destroys the children of an unfinished when_all") {
    LifetimeCounter counter;
    std::atomic<int> reached{0};
    std::atomic<int> resumed{0};
    {
        Runtime rt(RuntimeConfig{.workers = 2});
        rt.spawn(await_when_all(Counted(counter), reached, resumed)).detach();
        REQUIRE(wait_count(reached, 2));
    }
    CHECK(resumed.load() == 0);
    CHECK(counter.alive() == 0);
}

TEST_CASE("tasks destroyed by shutdown are not reported as unhandled exceptions") {
    std::atomic<int> reports{0};
    LifetimeCounter counter;
    std::atomic<int> reached{0};
    std::atomic<int> resumed{0};
    {
        Runtime rt(
            RuntimeConfig{.workers = 2, .on_unhandled_exception = [&](std::exception_ptr) { reports.fetch_add(1); }});
        rt.spawn(await_forever(Counted(counter), reached, resumed)).detach();
        REQUIRE(wait_count(reached, 1));
    }
    CHECK(reports.load() == 0);
    CHECK(counter.alive() == 0);
}

// ---------------------------------------------------------------------------------------------
// What runs during shutdown

TEST_CASE("a task running when shutdown begins finishes its step and keeps its result") {
    std::promise<void> started;
    Runtime other(RuntimeConfig{.workers = 1});
    Runtime rt(RuntimeConfig{.workers = 1});
    JoinHandle<int> h = rt.spawn(finish_during_shutdown(started));
    REQUIRE(started.get_future().wait_for(kDeadline) == std::future_status::ready);
    rt.shutdown();
    REQUIRE(h.is_finished());
    CHECK(other.block_on(join(std::move(h))) == 5);
}

TEST_CASE("a task that suspends after shutdown began is never resumed, only destroyed") {
    LifetimeCounter counter;
    std::promise<void> started;
    std::atomic<int> resumed{0};
    Runtime other(RuntimeConfig{.workers = 1});
    Runtime rt(RuntimeConfig{.workers = 1});
    JoinHandle<int> h = rt.spawn(suspend_during_shutdown(Counted(counter), started, resumed));
    REQUIRE(started.get_future().wait_for(kDeadline) == std::future_status::ready);
    rt.shutdown();
    CHECK(resumed.load() == 0);
    CHECK(counter.alive() == 0);
    CHECK(h.is_finished());
    CHECK(other.block_on(join_outcome(std::move(h))) == JoinOutcome::runtime_stopped);
}

// ---------------------------------------------------------------------------------------------
// Idempotence and concurrent callers

TEST_CASE("shutdown is idempotent") {
    LifetimeCounter counter;
    std::atomic<int> reached{0};
    std::atomic<int> resumed{0};
    {
        Runtime rt(RuntimeConfig{.workers = 2});
        rt.spawn(await_forever(Counted(counter), reached, resumed)).detach();
        REQUIRE(wait_count(reached, 1));
        rt.shutdown();
        CHECK(counter.alive() == 0);
        rt.shutdown();
        CHECK(rt.workers() == 2);
    }  // and the destructor shuts down a third time
    CHECK(counter.alive() == 0);
}

TEST_CASE("shutdown called from two threads at once returns in both") {
    LifetimeCounter counter;
    std::atomic<int> reached{0};
    std::atomic<int> resumed{0};
    std::atomic<int> returned{0};
    Runtime rt(RuntimeConfig{.workers = 2});
    rt.spawn(await_forever(Counted(counter), reached, resumed)).detach();
    REQUIRE(wait_count(reached, 1));
    std::thread a([&] {
        rt.shutdown();
        returned.fetch_add(1);
    });
    std::thread b([&] {
        rt.shutdown();
        returned.fetch_add(1);
    });
    a.join();
    b.join();
    CHECK(returned.load() == 2);
    CHECK(counter.alive() == 0);
}

TEST_CASE("block_on throws RuntimeStopped when another thread shuts the runtime down") {
    LifetimeCounter counter;
    std::atomic<int> reached{0};
    std::atomic<int> resumed{0};
    Runtime rt(RuntimeConfig{.workers = 2});
    std::thread stopper([&] {
        if (wait_count(reached, 1)) rt.shutdown();
    });
    CHECK_THROWS_AS(rt.block_on(await_forever(Counted(counter), reached, resumed)), eddy::RuntimeStopped);
    stopper.join();
    CHECK(reached.load() == 1);  // the task was waiting when shutdown came, not refused
    CHECK(resumed.load() == 0);
    CHECK(counter.alive() == 0);
}

TEST_CASE("a runtime destroyed on another thread cancels a task whose handle is held here") {
    LifetimeCounter counter;
    std::atomic<int> reached{0};
    std::atomic<int> resumed{0};
    auto rt = std::make_unique<Runtime>(RuntimeConfig{.workers = 2});
    JoinHandle<void> h = rt->spawn(await_forever(Counted(counter), reached, resumed));
    REQUIRE(wait_count(reached, 1));
    std::thread destroyer([&] { rt.reset(); });
    destroyer.join();
    Runtime other(RuntimeConfig{.workers = 1});
    CHECK(other.block_on(join_outcome(std::move(h))) == JoinOutcome::runtime_stopped);
    CHECK(counter.alive() == 0);
}

TEST_CASE("creating and destroying runtimes repeatedly does not hang") {
    int created = 0;
    for (int i = 0; i < 50; ++i) {
        Runtime rt(RuntimeConfig{.workers = 1 + static_cast<std::size_t>(i % 3)});
        ++created;
    }
    CHECK(created == 50);
}

}  // TEST_SUITE("runtime/shutdown")
