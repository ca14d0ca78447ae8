// tests/runtime/yield_now_test.cpp: eddy::yield_now lets the other runnable tasks go first.
//
// Ordering tests use one worker: there "behind every other runnable task" is an exact order.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <exception>
#include <future>
#include <string>
#include <vector>

#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/waiting.hpp"

using eddy::JoinHandle;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::test::Eager;
using eddy::test::kDeadline;
using eddy::test::past;
using namespace std::chrono_literals;

namespace {

Task<void> set_flag(std::atomic<bool>& flag) {
    flag.store(true);
    co_return;
}

template <class T>
Task<T> join(JoinHandle<T> h) {
    co_return co_await std::move(h);
}

/// Spawns a task that sets `flag`, yields once, and reports whether the flag was set by then.
Task<bool> spawn_then_yield(std::atomic<bool>& flag) {
    JoinHandle<void> h = eddy::spawn(set_flag(flag));
    const bool before = flag.load();
    co_await eddy::yield_now();
    const bool after = flag.load();
    co_await std::move(h);
    co_return !before && after;
}

/// Signals `started`, waits (bounded spin, no suspension) until the test thread has queued
/// another task from outside, then yields once; reports whether that task ran meanwhile.
Task<bool> yield_behind_injected(std::promise<void>& started, std::atomic<bool>& injected, std::atomic<bool>& flag) {
    started.set_value();
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (!injected.load())
        if (past(deadline)) co_return false;
    const bool before = flag.load();
    co_await eddy::yield_now();
    co_return !before && flag.load();
}

Task<int> yield_many(int times) {
    int n = 0;
    for (int i = 0; i < times; ++i) {
        co_await eddy::yield_now();
        ++n;
    }
    co_return n;
}

Task<void> yield_and_count(std::atomic<int>& total, int times) {
    for (int i = 0; i < times; ++i) {
        co_await eddy::yield_now();
        total.fetch_add(1);
    }
}

Task<void> many_yielders(std::atomic<int>& total, int children, int times) {
    std::vector<Task<void>> tasks;
    for (int i = 0; i < children; ++i) tasks.push_back(yield_and_count(total, times));
    co_await eddy::when_all(std::move(tasks));
}

/// Appends `name` to `log` `times` times, yielding after each. One worker only: `log` is
/// then touched by one thread at a time.
Task<void> log_and_yield(std::string& log, char name, int times) {
    for (int i = 0; i < times; ++i) {
        log.push_back(name);
        co_await eddy::yield_now();
    }
}

Task<std::string> two_yielders(int times) {
    std::string log;
    JoinHandle<void> a = eddy::spawn(log_and_yield(log, 'a', times));
    JoinHandle<void> b = eddy::spawn(log_and_yield(log, 'b', times));
    co_await a;
    co_await b;
    co_return log;
}

Eager yield_off_worker(bool& threw_wrong_thread, bool& finished) {
    try {
        co_await eddy::yield_now();
    } catch (const eddy::WrongThread&) {
        threw_wrong_thread = true;
    }
    finished = true;
}

}  // namespace

TEST_SUITE("runtime/yield_now") {

TEST_CASE("yield_now lets a task spawned on the same worker run first") {
    std::atomic<bool> flag{false};
    Runtime rt(RuntimeConfig{.workers = 1});
    CHECK(rt.block_on(spawn_then_yield(flag)));
}

TEST_CASE("yield_now lets a task queued from outside the runtime run first") {
    std::atomic<bool> injected{false};
    std::atomic<bool> flag{false};
    std::promise<void> started;
    Runtime rt(RuntimeConfig{.workers = 1});
    JoinHandle<bool> yielder = rt.spawn(yield_behind_injected(started, injected, flag));
    REQUIRE(started.get_future().wait_for(kDeadline) == std::future_status::ready);
    JoinHandle<void> other = rt.spawn(set_flag(flag));  // queued while the only worker is busy
    injected.store(true);
    other.detach();
    CHECK(rt.block_on(join(std::move(yielder))));
}

TEST_CASE("two tasks yielding on one worker take turns") {
    Runtime rt(RuntimeConfig{.workers = 1});
    const std::string log = rt.block_on(two_yielders(50));
    REQUIRE(log.size() == 100);
    for (std::size_t i = 1; i < log.size(); ++i) {
        CAPTURE(i);
        CHECK(log[i] != log[i - 1]);
    }
}

TEST_CASE("a task that yields many times finishes") {
    Runtime rt(RuntimeConfig{.workers = 1});
    CHECK(rt.block_on(yield_many(20'000)) == 20'000);
}

TEST_CASE("yield_now in loops across two workers completes every iteration") {
    std::atomic<int> total{0};
    Runtime rt(RuntimeConfig{.workers = 2});
    rt.block_on(many_yielders(total, 8, 1'000));
    CHECK(total.load() == 8'000);
}

TEST_CASE("yield_now off a worker thread throws WrongThread") {
    bool threw_wrong_thread = false;
    bool finished = false;
    yield_off_worker(threw_wrong_thread, finished);
    CHECK(finished);
    CHECK(threw_wrong_thread);
}

}  // TEST_SUITE("runtime/yield_now")
