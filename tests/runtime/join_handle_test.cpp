// tests/runtime/join_handle_test.cpp: JoinHandle<T>: awaiting, is_finished, moving,
// detaching, misuse, and handles whose task was destroyed by shutdown.
//
// Awaiting a handle needs a worker, so the test thread awaits through `join` (a task run by
// block_on). State shared with tasks is declared before the Runtime, so it outlives them.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <exception>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

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
using eddy::test::wait_finished;
using eddy::test::Eager;
using namespace std::chrono_literals;

namespace {

Task<int> value(int v) { co_return v; }

Task<std::string> text(std::string s) { co_return s; }

Task<std::unique_ptr<int>> boxed(int v) { co_return std::make_unique<int>(v); }

Task<void> set_flag(std::atomic<bool>& flag) {
    flag.store(true);
    co_return;
}

Task<int> fail(std::string message) {
    throw std::runtime_error(message);
    co_return 0;
}

Task<int> hold(Counted c) { co_return c.value(); }

/// Yields until `go` is set (bounded), then returns `v`.
Task<int> value_when(std::atomic<bool>& go, int v) {
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (!go.load()) {
        if (past(deadline)) throw std::runtime_error("value_when: never released");
        co_await eddy::yield_now();
    }
    co_return v;
}

/// Yields until `go` is set (bounded), then signals `done`.
Task<void> signal_when(std::atomic<bool>& go, std::promise<void>& done) {
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (!go.load() && !past(deadline)) co_await eddy::yield_now();
    done.set_value();
}

/// Never finishes; keeps one worker busy between its yields. Destroyed by shutdown.
Task<void> forever() {
    for (;;) co_await eddy::yield_now();
}

template <class T>
Task<T> join(JoinHandle<T> h) {
    co_return co_await std::move(h);
}

/// Awaits the handle as an lvalue twice; the second await must throw BrokenTask.
Task<bool> await_twice(JoinHandle<int> h) {
    (void)co_await h;
    try {
        (void)co_await h;
    } catch (const eddy::BrokenTask&) {
        co_return true;
    }
    co_return false;
}

Task<bool> await_default_constructed() {
    JoinHandle<int> h;
    try {
        (void)co_await h;
    } catch (const eddy::BrokenTask&) {
        co_return true;
    }
    co_return false;
}

Task<bool> handle_invalid_after_await(JoinHandle<int> h) {
    (void)co_await h;
    co_return !h.valid();
}

/// What awaiting a handle whose task was cancelled gives.
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

Eager await_off_worker(JoinHandle<int>& h, bool& threw_wrong_thread, bool& finished) {
    try {
        (void)co_await h;
    } catch (const eddy::WrongThread&) {
        threw_wrong_thread = true;
    }
    finished = true;
}

}  // namespace

TEST_SUITE("runtime/join_handle") {

// ---------------------------------------------------------------------------------------------
// Results

TEST_CASE("co_await on a handle gives the task's value") {
    Runtime rt(RuntimeConfig{.workers = 2});
    CHECK(rt.block_on(join(rt.spawn(value(3)))) == 3);
}

TEST_CASE("co_await on a handle rethrows the task's exception") {
    Runtime rt(RuntimeConfig{.workers = 2});
    CHECK_THROWS_WITH_AS(rt.block_on(join(rt.spawn(fail("joined boom")))), "joined boom", std::runtime_error);
}

TEST_CASE("a JoinHandle<void> completes after its task ran") {
    std::atomic<bool> ran{false};
    Runtime rt(RuntimeConfig{.workers = 2});
    rt.block_on(join(rt.spawn(set_flag(ran))));
    CHECK(ran.load());
}

TEST_CASE("a JoinHandle<std::string> gives the string") {
    Runtime rt(RuntimeConfig{.workers = 2});
    const std::string long_text(200, 'y');
    CHECK(rt.block_on(join(rt.spawn(text(long_text)))) == long_text);
}

TEST_CASE("a JoinHandle of a move-only result moves it out") {
    Runtime rt(RuntimeConfig{.workers = 2});
    std::unique_ptr<int> p = rt.block_on(join(rt.spawn(boxed(4))));
    REQUIRE(p != nullptr);
    CHECK(*p == 4);
}

TEST_CASE("awaiting a handle whose task already finished gives the result without waiting") {
    Runtime rt(RuntimeConfig{.workers = 2});
    JoinHandle<int> h = rt.spawn(value(6));
    REQUIRE(wait_finished(h));
    CHECK(rt.block_on(join(std::move(h))) == 6);
}

TEST_CASE("awaiting a handle consumes it") {
    Runtime rt(RuntimeConfig{.workers = 2});
    CHECK(rt.block_on(handle_invalid_after_await(rt.spawn(value(1)))));
}

TEST_CASE("the task's frame is destroyed once its handle was awaited") {
    LifetimeCounter counter;
    Runtime rt(RuntimeConfig{.workers = 2});
    CHECK(rt.block_on(join(rt.spawn(hold(Counted(counter, 2))))) == 2);
    CHECK(counter.alive() == 0);  // block_on returned: the await (and the frame) are done
}

// ---------------------------------------------------------------------------------------------
// Misuse

TEST_CASE("awaiting a handle twice throws BrokenTask") {
    Runtime rt(RuntimeConfig{.workers = 2});
    CHECK(rt.block_on(await_twice(rt.spawn(value(1)))));
}

TEST_CASE("awaiting a default-constructed handle throws BrokenTask") {
    Runtime rt(RuntimeConfig{.workers = 1});
    CHECK(rt.block_on(await_default_constructed()));
}

TEST_CASE("awaiting a moved-from handle throws BrokenTask") {
    Runtime rt(RuntimeConfig{.workers = 1});
    JoinHandle<int> a = rt.spawn(value(1));
    JoinHandle<int> b = std::move(a);
    CHECK_THROWS_AS(rt.block_on(join(std::move(a))), eddy::BrokenTask);
    CHECK(rt.block_on(join(std::move(b))) == 1);
}

TEST_CASE("awaiting an unfinished handle off a worker thread throws WrongThread") {
    std::atomic<bool> go{false};
    Runtime rt(RuntimeConfig{.workers = 1});
    JoinHandle<int> h = rt.spawn(value_when(go, 5));
    bool threw_wrong_thread = false;
    bool finished = false;
    await_off_worker(h, threw_wrong_thread, finished);
    CHECK(finished);
    CHECK(threw_wrong_thread);
    CHECK(h.valid());  // the failed await left the handle as it was
    go.store(true);
    CHECK(rt.block_on(join(std::move(h))) == 5);
}

// ---------------------------------------------------------------------------------------------
// State and ownership

TEST_CASE("a default-constructed handle is not valid and not finished") {
    JoinHandle<int> h;
    CHECK_FALSE(h.valid());
    CHECK_FALSE(h.is_finished());
}

TEST_CASE("is_finished is false while the task runs and true once it returned") {
    std::atomic<bool> go{false};
    Runtime rt(RuntimeConfig{.workers = 2});
    JoinHandle<int> h = rt.spawn(value_when(go, 9));
    CHECK_FALSE(h.is_finished());
    go.store(true);
    REQUIRE(wait_finished(h));
    CHECK(h.is_finished());
    CHECK(rt.block_on(join(std::move(h))) == 9);
}

TEST_CASE("is_finished is true once the task failed") {
    Runtime rt(RuntimeConfig{.workers = 2});
    JoinHandle<int> h = rt.spawn(fail("x"));
    CHECK(wait_finished(h));
    CHECK_THROWS_AS(rt.block_on(join(std::move(h))), std::runtime_error);
}

TEST_CASE("a moved-to handle owns the task and the moved-from one is empty") {
    Runtime rt(RuntimeConfig{.workers = 2});
    JoinHandle<int> a = rt.spawn(value(7));
    JoinHandle<int> b(std::move(a));
    CHECK_FALSE(a.valid());
    CHECK(b.valid());
    JoinHandle<int> c;
    c = std::move(b);
    CHECK_FALSE(b.valid());
    CHECK(c.valid());
    CHECK(rt.block_on(join(std::move(c))) == 7);
}

TEST_CASE("move-assigning over a handle detaches the task it held, which still runs") {
    std::atomic<bool> go{false};
    std::promise<void> done;
    std::atomic<bool> second_ran{false};
    Runtime rt(RuntimeConfig{.workers = 2});
    JoinHandle<void> h = rt.spawn(signal_when(go, done));
    h = rt.spawn(set_flag(second_ran));
    go.store(true);  // the first task may finish only after its handle was overwritten
    CHECK(done.get_future().wait_for(kDeadline) == std::future_status::ready);
    rt.block_on(join(std::move(h)));
    CHECK(second_ran.load());
}

TEST_CASE("detach leaves the handle empty and the task runs to completion") {
    std::atomic<bool> go{false};
    std::promise<void> done;
    Runtime rt(RuntimeConfig{.workers = 2});
    JoinHandle<void> h = rt.spawn(signal_when(go, done));
    h.detach();
    CHECK_FALSE(h.valid());
    CHECK_FALSE(h.is_finished());
    h.detach();      // a second detach does nothing
    go.store(true);  // the task may finish only after it was detached
    CHECK(done.get_future().wait_for(kDeadline) == std::future_status::ready);
    CHECK_THROWS_AS(rt.block_on(join(std::move(h))), eddy::BrokenTask);
}

TEST_CASE("a detached task's frame is destroyed when it finishes") {
    LifetimeCounter counter;
    Runtime rt(RuntimeConfig{.workers = 2});
    rt.spawn(hold(Counted(counter, 1))).detach();
    // hold() cannot suspend, so its frame is destroyed at its final suspend; wait for that.
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (counter.alive() != 0 && !past(deadline)) std::this_thread::yield();
    CHECK(counter.alive() == 0);
    CHECK(counter.constructions() > 0);
}

// ---------------------------------------------------------------------------------------------
// Shutdown

TEST_CASE("a handle whose task was destroyed by shutdown is finished and throws RuntimeStopped") {
    Runtime other(RuntimeConfig{.workers = 1});
    Runtime rt(RuntimeConfig{.workers = 1});
    JoinHandle<void> h = rt.spawn(forever());
    rt.shutdown();
    CHECK(h.is_finished());
    CHECK(other.block_on(join_outcome(std::move(h))) == JoinOutcome::runtime_stopped);
}

TEST_CASE("a handle that outlives its runtime throws RuntimeStopped when awaited") {
    Runtime other(RuntimeConfig{.workers = 1});
    JoinHandle<void> h;
    {
        Runtime rt(RuntimeConfig{.workers = 2});
        h = rt.spawn(forever());
    }
    CHECK(h.is_finished());
    CHECK(other.block_on(join_outcome(std::move(h))) == JoinOutcome::runtime_stopped);
}

TEST_CASE("a handle that outlives its runtime can be dropped") {
    JoinHandle<void> h;
    {
        Runtime rt(RuntimeConfig{.workers = 1});
        h = rt.spawn(forever());
    }
    CHECK(h.valid());
    h = JoinHandle<void>{};  // frees the header; ASan checks that nothing is touched twice
    CHECK_FALSE(h.valid());
}

TEST_CASE("a finished task's handle that outlives its runtime still gives the result") {
    Runtime other(RuntimeConfig{.workers = 1});
    JoinHandle<int> h;
    {
        Runtime rt(RuntimeConfig{.workers = 1});
        h = rt.spawn(value(12));
        REQUIRE(wait_finished(h));
    }
    CHECK(other.block_on(join(std::move(h))) == 12);
}

}  // TEST_SUITE("runtime/join_handle")
