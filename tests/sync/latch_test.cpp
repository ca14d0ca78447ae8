// tests/sync/latch_test.cpp: eddy::Latch: counting down from tasks and threads,
// arrive_and_wait as a barrier across workers, cancellation of a waiter, and misuse.
#include <doctest/doctest.h>

#include <atomic>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <eddy/runtime/join_handle.hpp>
#include <eddy/sync/latch.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/sync_helpers.hpp"
#include "support/waiting.hpp"

using eddy::JoinHandle;
using eddy::Latch;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::test::Eager;
using eddy::test::outcome;
using eddy::test::settle;

namespace {

Task<void> wait_for(Latch& l) { co_await l.wait(); }

/// Arrives, waits for everyone, then checks that everyone had arrived.
Task<bool> arrive(Latch& l, std::atomic<int>& arrived, int total) {
    arrived.fetch_add(1);
    co_await l.arrive_and_wait();
    co_return arrived.load() == total;
}

Eager wait_off_worker(Latch& l, std::string& how) {
    try {
        co_await l.wait();
        how = "ok";
    } catch (const eddy::WrongThread&) {
        how = "wrong thread";
    }
}

}  // namespace

TEST_SUITE("sync/latch") {

TEST_CASE("the waiters wake when the count reaches zero, counted down from another thread") {
    Runtime rt(RuntimeConfig{.workers = 2});
    Latch l(3);
    std::vector<JoinHandle<void>> waiters;
    for (int i = 0; i < 8; ++i) waiters.push_back(rt.spawn(wait_for(l)));
    CHECK_FALSE(l.try_wait());
    l.count_down();
    l.count_down();
    CHECK_FALSE(l.try_wait());
    for (auto& h : waiters) CHECK_FALSE(h.is_finished());
    std::thread last([&l] { l.count_down(); });
    last.join();
    CHECK(l.try_wait());
    for (auto& h : waiters) CHECK(eddy::test::wait_finished(h));
}

TEST_CASE("arrive_and_wait is a one-shot barrier across four workers") {
    Runtime rt(RuntimeConfig{.workers = 4});
    constexpr int kTasks = 32;
    Latch l(kTasks);
    std::atomic<int> arrived{0};
    const int all_saw_everyone = rt.block_on([](Latch& latch, std::atomic<int>& arrivals) -> Task<int> {
        std::vector<JoinHandle<bool>> all;
        for (int i = 0; i < kTasks; ++i) all.push_back(eddy::spawn(arrive(latch, arrivals, kTasks)));
        int ok = 0;
        for (auto& h : all) ok += (co_await std::move(h)) ? 1 : 0;
        co_return ok;
    }(l, arrived));
    CHECK(all_saw_everyone == kTasks);
    CHECK(l.try_wait());
}

TEST_CASE("a cancelled wait throws OperationCancelled; the count is untouched") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Latch l(1);
    struct Result {
        std::string cancelled, other;
    };
    const Result r = rt.block_on([](Latch& latch) -> Task<Result> {
        std::stop_source stop;
        JoinHandle<void> cancelled = eddy::spawn(eddy::with_stop_token(wait_for(latch), stop.get_token()));
        JoinHandle<void> other = eddy::spawn(wait_for(latch));
        co_await settle();
        stop.request_stop();
        Result result;
        result.cancelled = co_await outcome(std::move(cancelled));
        latch.count_down();
        result.other = co_await outcome(std::move(other));
        co_return result;
    }(l));
    CHECK(r.cancelled == "cancelled");
    CHECK(r.other == "ok");
}

TEST_CASE("misuse: counting down past zero throws invalid_argument; waiting off a worker throws WrongThread") {
    Latch l(2);
    CHECK_THROWS_AS(l.count_down(3), std::invalid_argument);
    CHECK_FALSE(l.try_wait());  // nothing changed
    l.count_down(2);
    CHECK(l.try_wait());
    CHECK_THROWS_AS(l.count_down(), std::invalid_argument);

    Latch other(1);
    std::string how;
    wait_off_worker(other, how);
    CHECK(how == "wrong thread");
}

}  // TEST_SUITE("sync/latch")
