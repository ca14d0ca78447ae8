// tests/stress/blocking_stress_test.cpp: the blocking pool under churn (runtime/
// blocking_pool.hpp): many calls from many tasks through few threads that keep exiting and
// starting again, and runtimes shut down with calls queued and running. Every call that runs
// is counted once, every handle gives its value or RuntimeStopped, nothing leaks or races.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/metrics.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn_blocking.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/stress_env.hpp"

using eddy::JoinHandle;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using namespace std::chrono_literals;

namespace {

constexpr int kTasks = 200;
constexpr int kCallsPerTask = 10;

/// Makes kCallsPerTask blocking calls, some awaited, some dropped; returns the sum awaited.
Task<std::uint64_t> caller(int id, std::shared_ptr<std::atomic<std::uint64_t>> ran) {
    std::uint64_t sum = 0;
    for (int i = 0; i < kCallsPerTask; ++i) {
        const std::uint64_t v = static_cast<std::uint64_t>(id * kCallsPerTask + i);
        JoinHandle<std::uint64_t> h = eddy::spawn_blocking([v, ran] {
            if (v % 7 == 0) std::this_thread::sleep_for(50us);
            ran->fetch_add(1, std::memory_order_relaxed);
            return v;
        });
        if (i % 3 == 2) continue;  // dropped: the call still runs
        sum += co_await std::move(h);
    }
    co_return sum;
}

}  // namespace

TEST_CASE("2000 blocking calls through 3 threads that come and go: each runs once, every awaited value arrives") {
    const std::size_t defaults[] = {1, 2, 4};
    for (std::size_t workers : eddy::test::stress_worker_counts(defaults)) {
        CAPTURE(workers);
        auto ran = std::make_shared<std::atomic<std::uint64_t>>(0);
        RuntimeConfig config{.workers = workers};
        config.max_blocking_threads = 3;
        config.blocking_keep_alive = 1ms;  // threads exit between bursts and start again
        std::uint64_t expected = 0;
        for (int id = 0; id < kTasks; ++id)
            for (int i = 0; i < kCallsPerTask; ++i)
                if (i % 3 != 2) expected += static_cast<std::uint64_t>(id * kCallsPerTask + i);
        Runtime rt(config);
        std::vector<Task<std::uint64_t>> tasks;
        for (int id = 0; id < kTasks; ++id) tasks.push_back(caller(id, ran));
        const std::vector<std::uint64_t> sums = rt.block_on(eddy::when_all(std::move(tasks)));
        std::uint64_t total = 0;
        for (std::uint64_t s : sums) total += s;
        CHECK(total == expected);
        const auto end = std::chrono::steady_clock::now() + 20s;
        // A dropped call's body may still be running, and the pool counts a call
        // only after its body returned: wait for both counts to settle.
        const std::uint64_t calls = std::uint64_t{kTasks} * kCallsPerTask;
        while ((ran->load() < calls || rt.metrics().blocking_calls < calls) && std::chrono::steady_clock::now() < end)
            std::this_thread::sleep_for(1ms);
        CHECK(ran->load() == std::uint64_t{kTasks} * kCallsPerTask);
        CHECK(rt.metrics().blocking_calls == std::uint64_t{kTasks} * kCallsPerTask);
    }
}

TEST_CASE("runtimes shut down with blocking calls queued and running: each call runs at most once, no hang") {
    std::mt19937 rng(std::random_device{}());
    for (int round = 0; round < 20; ++round) {
        auto ran = std::make_shared<std::atomic<int>>(0);
        std::vector<JoinHandle<int>> handles;
        {
            RuntimeConfig config{.workers = 1 + static_cast<std::size_t>(round % 3)};
            config.max_blocking_threads = 1 + static_cast<std::size_t>(rng() % 4);
            config.blocking_shutdown_timeout = 20ms;
            Runtime rt(config);
            for (int i = 0; i < 40; ++i)
                handles.push_back(rt.spawn_blocking([ran, us = rng() % 2000] {
                    std::this_thread::sleep_for(std::chrono::microseconds(us));
                    return ran->fetch_add(1) + 1;
                }));
            std::this_thread::sleep_for(std::chrono::microseconds(rng() % 5000));
        }
        // Every handle is settled: a value (the call ran and its task finished) or
        // RuntimeStopped (dropped, or its task destroyed by shutdown).
        Runtime other(RuntimeConfig{.workers = 1});
        int values = 0;
        for (auto& h : handles) {
            CHECK(h.is_finished());
            try {
                (void)other.block_on(
                    [](JoinHandle<int> handle) -> Task<int> { co_return co_await std::move(handle); }(std::move(h)));
                ++values;
            } catch (const eddy::RuntimeStopped&) {
            }
        }
        CHECK(values <= ran->load());
        std::this_thread::sleep_for(10ms);  // calls left running end on their threads
        CHECK(ran->load() <= 40);
    }
}
