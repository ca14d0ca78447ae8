// tests/runtime/abort_test.cpp: aborting spawned tasks (eddy::spawn_abortable, JoinHandle::abort,
// AbortHandle): what a waiting task sees, what its handle reports, aborts that come too late,
// misuse, and the unhandled-exception hook.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <eddy/eddy.hpp>

#include "support/sync_helpers.hpp"

using eddy::AbortHandle;
using eddy::Event;
using eddy::JoinHandle;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::test::settle;
using namespace std::chrono_literals;

namespace {

Task<int> nested_wait(Event& never, std::atomic<int>& cancelled) {
    // The abort reaches an awaited child (it inherits the root's cancellation).
    co_return co_await eddy::test::wait_counting_cancel(never, cancelled) + 1;
}

Task<int> sleeper() {
    co_await eddy::sleep(1h);
    co_return 1;
}

Task<int> answer() { co_return 42; }

Task<int> fails() {
    throw std::runtime_error("boom");
    co_return 0;
}

// Ignores cancellation: computes, reaches no cancellation point, returns a value.
Task<int> stubborn(std::atomic<bool>& go) {
    while (!go.load()) std::this_thread::yield();
    co_return 7;
}

template <class T>
Task<std::string> how(JoinHandle<T> h) {
    try {
        co_await std::move(h);
        co_return "ok";
    } catch (const eddy::TaskAborted&) {
        co_return "aborted";
    } catch (const std::exception& e) {
        co_return std::string("other: ") + e.what();
    }
}

}  // namespace

TEST_CASE("abort cancels the wait a task is suspended on; its handle reports TaskAborted") {
    Event never;
    std::atomic<int> cancelled{0};
    Runtime rt(RuntimeConfig{.workers = 2});
    std::string r = rt.block_on([](Event& never_set, std::atomic<int>& cancels) -> Task<std::string> {
        JoinHandle<int> h = eddy::spawn_abortable(nested_wait(never_set, cancels));
        CHECK(h.abortable());
        co_await settle();
        co_await eddy::sleep(10ms);  // it is suspended on the event by now
        CHECK_FALSE(h.is_finished());
        h.abort();
        co_return co_await how(std::move(h));
    }(never, cancelled));
    CHECK(r == "aborted");
    CHECK(cancelled.load() == 1);
}

TEST_CASE("abort cancels a sleep and reaches a task that has not started yet") {
    Runtime rt(RuntimeConfig{.workers = 1});
    std::string slept = rt.block_on([]() -> Task<std::string> {
        JoinHandle<int> h = eddy::spawn_abortable(sleeper());
        co_await settle();
        h.abort();
        co_return co_await how(std::move(h));
    }());
    CHECK(slept == "aborted");
    // Aborted before it ever ran: its first wait throws at once.
    std::string unstarted = rt.block_on([]() -> Task<std::string> {
        JoinHandle<int> h = eddy::spawn_abortable(sleeper());
        h.abort();
        co_return co_await how(std::move(h));
    }());
    CHECK(unstarted == "aborted");
}

TEST_CASE("aborting a finished task is a no-op: its value or its own exception stands") {
    Runtime rt(RuntimeConfig{.workers = 2});
    int v = rt.block_on([]() -> Task<int> {
        JoinHandle<int> h = eddy::spawn_abortable(answer());
        while (!h.is_finished()) co_await eddy::yield_now();
        h.abort();
        h.abort();  // twice: the same as once
        co_return co_await std::move(h);
    }());
    CHECK(v == 42);
    std::string e = rt.block_on([]() -> Task<std::string> {
        JoinHandle<int> h = eddy::spawn_abortable(fails());
        while (!h.is_finished()) co_await eddy::yield_now();
        h.abort();
        co_return co_await how(std::move(h));
    }());
    CHECK(e == "other: boom");
}

TEST_CASE("a task that reaches no cancellation point after an abort keeps its value") {
    std::atomic<bool> go{false};
    Runtime rt(RuntimeConfig{.workers = 2});
    int v = rt.block_on([](std::atomic<bool>& start) -> Task<int> {
        JoinHandle<int> h = eddy::spawn_abortable(stubborn(start));
        AbortHandle a = h.abort_handle();
        a.abort();
        start.store(true);
        int r = co_await std::move(h);
        CHECK(a.aborted());
        co_return r;
    }(go));
    CHECK(v == 7);
}

TEST_CASE("an AbortHandle is copyable, works from a plain thread and outlives its task") {
    Event never;
    std::atomic<int> cancelled{0};
    AbortHandle kept;
    {
        Runtime rt(RuntimeConfig{.workers = 2});
        JoinHandle<int> h = rt.spawn_abortable(eddy::test::wait_counting_cancel(never, cancelled));
        AbortHandle a = h.abort_handle();
        AbortHandle b = a;  // a copy aborts the same task
        kept = b;
        std::thread t([b] { b.abort(); });
        t.join();
        CHECK(a.aborted());
        std::string r = rt.block_on(how(std::move(h)));
        CHECK(r == "aborted");
        CHECK(cancelled.load() == 1);
    }
    kept.abort();  // the task and its runtime are gone: nothing happens
    CHECK(kept.aborted());
    AbortHandle empty;
    empty.abort();  // aborts nothing
    CHECK_FALSE(empty.valid());
}

TEST_CASE("a detached aborted task is not reported as an unhandled exception") {
    std::mutex m;
    std::vector<std::string> reported;
    Event never;
    std::atomic<int> cancelled{0};
    {
        RuntimeConfig cfg{.workers = 1};
        cfg.on_unhandled_exception = [&](std::exception_ptr e) {
            std::lock_guard lock(m);
            reported.push_back(eddy::test::describe(e));
        };
        Runtime rt(cfg);
        rt.block_on([](Event& never_set, std::atomic<int>& cancels) -> Task<void> {
            AbortHandle a;
            {
                JoinHandle<int> h = eddy::spawn_abortable(eddy::test::wait_counting_cancel(never_set, cancels));
                a = h.abort_handle();
            }  // dropped: detached
            co_await settle();
            a.abort();
            for (int i = 0; i < 1000 && cancels.load() == 0; ++i) co_await eddy::sleep(1ms);
            // A detached task that fails on its own is still reported.
            eddy::spawn_abortable(fails()).detach();
            co_await settle();
        }(never, cancelled));
        rt.shutdown();
    }
    CHECK(cancelled.load() == 1);
    std::lock_guard lock(m);
    REQUIRE(reported.size() == 1);
    CHECK(reported[0] == "other: boom");
}

TEST_CASE("misuse: abort on a plain spawn's handle throws NotAbortable, on an empty one BrokenTask") {
    Runtime rt(RuntimeConfig{.workers = 1});
    JoinHandle<int> h = rt.spawn(answer());
    CHECK_FALSE(h.abortable());
    CHECK_THROWS_AS(h.abort(), eddy::NotAbortable);
    CHECK_THROWS_AS((void)h.abort_handle(), eddy::NotAbortable);
    CHECK(rt.block_on(
              [](JoinHandle<int> handle) -> Task<int> { co_return co_await std::move(handle); }(std::move(h))) == 42);
    JoinHandle<int> empty;
    CHECK_THROWS_AS(empty.abort(), eddy::BrokenTask);
    CHECK_THROWS_AS(eddy::spawn_abortable(answer()), eddy::WrongThread);  // off a worker
    CHECK_THROWS_AS(eddy::spawn_abortable(Task<int>{}), eddy::BrokenTask);
    CHECK_THROWS_AS(rt.spawn_abortable(Task<int>{}), eddy::BrokenTask);
}

TEST_CASE("shutdown destroys an abortable task that still waits; its handle reports RuntimeStopped") {
    Event never;
    std::atomic<int> cancelled{0};
    JoinHandle<int> h;
    AbortHandle a;
    {
        Runtime rt(RuntimeConfig{.workers = 2});
        h = rt.spawn_abortable(eddy::test::wait_counting_cancel(never, cancelled));
        a = h.abort_handle();
        std::this_thread::sleep_for(10ms);
    }
    a.abort();  // after shutdown: a no-op
    CHECK(h.is_finished());
    Runtime other(RuntimeConfig{.workers = 1});
    std::string r = other.block_on(how(std::move(h)));
    CHECK(r.find("other:") == 0);  // RuntimeStopped
    CHECK(cancelled.load() == 0);  // destroyed, not cancelled
}
