// tests/runtime/current_runtime_test.cpp: eddy::Runtime::current() (Tokio's
// Handle::current()): from a task on one worker and on several at once, deep in a chain of
// awaited tasks, with two runtimes in one process, on threads that belong to no runtime
// (WrongThread), and from spawn_blocking calls, where it answers too (as Tokio's does) until
// the runtime's shutdown closes the blocking pool (RuntimeStopped); not in the thread hooks.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <eddy/runtime/config.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/spawn_blocking.hpp>
#include <eddy/runtime/this_worker.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/waiting.hpp"

using eddy::JoinHandle;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using namespace std::chrono_literals;

namespace {

/// What a task saw: the runtime current() named, and the worker it ran on.
struct Seen {
    const Runtime* runtime = nullptr;
    std::optional<std::size_t> worker;
};

template <class T>
Task<T> join(JoinHandle<T> h) {
    co_return co_await std::move(h);
}

Task<Seen> look() { co_return Seen{&Runtime::current(), eddy::this_worker::index()}; }

/// current() at the bottom of `depth` awaited tasks: no Runtime& passed down.
Task<const Runtime*> deep(int depth) {
    if (depth == 0) co_return &Runtime::current();
    co_return co_await deep(depth - 1);
}

/// Meets `n` - 1 other tasks (so each runs on its own worker), then asks.
Task<Seen> look_at_once(std::atomic<int>& started, int n) {
    const std::optional<std::size_t> worker = co_await eddy::test::rendezvous(started, n);
    co_return Seen{&Runtime::current(), worker};
}

/// The WrongThread message current() gives here, or "" if it did not throw that.
std::string wrong_thread_message() {
    try {
        (void)Runtime::current();
    } catch (const eddy::WrongThread& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("from a task on one worker: the runtime that runs it, also deep in awaited tasks") {
    Runtime rt(RuntimeConfig{.workers = 1});
    const Seen s = rt.block_on(look());
    CHECK(s.runtime == &rt);
    CHECK(rt.block_on(deep(50)) == &rt);
}

TEST_CASE("from tasks running at once on several workers: each gets the runtime that runs it") {
    constexpr int kWorkers = 3;
    Runtime rt(RuntimeConfig{.workers = kWorkers});
    std::atomic<int> started{0};
    std::vector<JoinHandle<Seen>> handles;
    for (int i = 0; i < kWorkers; ++i) handles.push_back(rt.spawn(look_at_once(started, kWorkers)));
    std::set<std::size_t> workers;
    for (auto& h : handles) {
        const Seen s = rt.block_on(join(std::move(h)));
        REQUIRE(s.worker.has_value());  // all met: they ran at once, one per worker
        workers.insert(*s.worker);
        CHECK(s.runtime == &rt);
    }
    CHECK(workers.size() == kWorkers);
}

TEST_CASE("current().spawn and current().metrics from inside a task, without a Runtime&") {
    Runtime rt(RuntimeConfig{.workers = 2});
    const auto [value, workers] = rt.block_on([]() -> Task<std::pair<int, std::size_t>> {
        JoinHandle<int> h = Runtime::current().spawn([]() -> Task<int> { co_return 42; }());
        const int v = co_await std::move(h);
        co_return std::pair{v, Runtime::current().metrics().workers.size()};
    }());
    CHECK(value == 42);
    CHECK(workers == 2);
}

TEST_CASE("two runtimes in one process: every task sees its own, also while both run") {
    Runtime a(RuntimeConfig{.workers = 2});
    Runtime b(RuntimeConfig{.workers = 2});
    std::vector<JoinHandle<Seen>> on_a, on_b;
    for (int i = 0; i < 32; ++i) {
        on_a.push_back(a.spawn(look()));
        on_b.push_back(b.spawn(look()));
    }
    for (auto& h : on_a) CHECK(a.block_on(join(std::move(h))).runtime == &a);
    for (auto& h : on_b) CHECK(b.block_on(join(std::move(h))).runtime == &b);
    // A task of `a` that awaits a task of `b`: each side answers with its own runtime.
    const auto [outer, inner] = a.block_on([](Runtime& other) -> Task<std::pair<const Runtime*, const Runtime*>> {
        const Runtime* in = co_await other.spawn(deep(3));
        co_return std::pair{&Runtime::current(), in};
    }(b));
    CHECK(outer == &a);
    CHECK(inner == &b);
}

TEST_CASE("off a runtime's threads it throws WrongThread, saying so") {
    Runtime rt(RuntimeConfig{.workers = 1});  // alive, but this thread is not one of its
    const std::string here = wrong_thread_message();
    CHECK(here.find("eddy::Runtime::current") != std::string::npos);
    CHECK(here.find("neither a runtime's worker nor one of its blocking threads") != std::string::npos);
    std::string plain;
    std::thread([&] { plain = wrong_thread_message(); }).join();
    CHECK(plain == here);
}

TEST_CASE("from a spawn_blocking call: the runtime whose blocking thread runs it, which it may block_on") {
    Runtime rt(RuntimeConfig{.workers = 2});
    // eddy::spawn_blocking from a task, and Runtime::spawn_blocking from this thread.
    const Runtime* from_task = rt.block_on([]() -> Task<const Runtime*> {
        co_return co_await eddy::spawn_blocking([] { return &Runtime::current(); });
    }());
    CHECK(from_task == &rt);
    CHECK(rt.block_on(join(rt.spawn_blocking([] { return &Runtime::current(); }))) == &rt);
    // Tokio's pattern: a blocking call that drives async work on its runtime.
    const int got = rt.block_on(
        join(rt.spawn_blocking([] { return Runtime::current().block_on([]() -> Task<int> { co_return 7; }()); })));
    CHECK(got == 7);
}

TEST_CASE("a blocking call still running at shutdown: current() throws RuntimeStopped once the pool closes") {
    std::atomic<int> answered{0};  // current() calls that returned this runtime
    std::atomic<bool> stopped{false};
    std::atomic<bool> wrong{false};
    {
        // Shutdown waits for the call (it ends as soon as it sees the close).
        Runtime rt(RuntimeConfig{.workers = 1, .blocking_shutdown_timeout = 60s});
        const Runtime* expected = &rt;
        JoinHandle<void> h = rt.spawn_blocking([&answered, &stopped, &wrong, expected] {
            const auto deadline = std::chrono::steady_clock::now() + eddy::test::kDeadline;
            while (!eddy::test::past(deadline)) {
                try {
                    if (&Runtime::current() != expected) wrong = true;
                    answered.fetch_add(1);
                } catch (const eddy::RuntimeStopped&) {
                    stopped = true;
                    return;
                }
                std::this_thread::sleep_for(1ms);
            }
        });
        const auto deadline = std::chrono::steady_clock::now() + eddy::test::kDeadline;
        while (answered.load() == 0 && !eddy::test::past(deadline)) std::this_thread::sleep_for(1ms);
        REQUIRE(answered.load() > 0);  // it runs, and has answered
        rt.shutdown();
        (void)h;  // its result is never asked for: the task behind it is gone with the runtime
    }
    CHECK(answered.load() > 0);
    CHECK_FALSE(wrong.load());
    CHECK(stopped.load());
}

TEST_CASE("the thread hooks run outside: on_thread_start gets WrongThread on every thread of the runtime") {
    std::atomic<int> answered{0}, refused{0};
    {
        RuntimeConfig config{.workers = 2};
        config.on_thread_start = [&] {
            try {
                (void)Runtime::current();
                answered.fetch_add(1);
            } catch (const eddy::WrongThread&) {
                refused.fetch_add(1);
            }
        };
        Runtime rt(std::move(config));
        // A blocking thread starts for the call and runs the hook before it.
        CHECK(rt.block_on(join(rt.spawn_blocking([] { return &Runtime::current(); }))) == &rt);
    }  // joined: every hook has run
    CHECK(answered.load() == 0);
    CHECK(refused.load() >= 3);  // two workers and a blocking thread (and the reactor's)
}
