// tests/sync/mutex_test.cpp: eddy::Mutex and MutexGuard: exclusion across workers, FIFO
// handoff, try_lock, guards, cancellation of a waiter, and misuse.
#include <doctest/doctest.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include <eddy/runtime/join_handle.hpp>
#include <eddy/sync/mutex.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/sync_helpers.hpp"
#include "support/waiting.hpp"

using eddy::JoinHandle;
using eddy::Mutex;
using eddy::MutexGuard;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::test::Eager;
using eddy::test::outcome;
using eddy::test::settle;

namespace {

/// Locks, records `id`, holds the lock over a few yields, then unlocks.
Task<void> take_turn(Mutex& m, std::vector<int>& order, int id) {
    MutexGuard g = co_await m.lock();
    order.push_back(id);
    co_await eddy::yield_now();
    co_await eddy::yield_now();
}

Task<void> lock_once(Mutex& m) { MutexGuard g = co_await m.lock(); }

Eager lock_off_worker(Mutex& m, std::string& how) {
    try {
        MutexGuard g = co_await m.lock();
        how = "ok";
    } catch (const eddy::WrongThread&) {
        how = "wrong thread";
    }
}

}  // namespace

TEST_SUITE("sync/mutex") {

TEST_CASE("many tasks on four workers increment a plain int under the lock, with yields inside") {
    Runtime rt(RuntimeConfig{.workers = 4});
    Mutex m;
    int counter = 0;  // plain: only the lock protects it
    constexpr int kTasks = 64, kIncrements = 100;
    rt.block_on([](Mutex& mutex, int& count) -> Task<void> {
        auto worker = [](Mutex& shared, int& value) -> Task<void> {
            for (int i = 0; i < kIncrements; ++i) {
                MutexGuard g = co_await shared.lock();
                const int seen = value;
                co_await eddy::yield_now();  // suspends inside the critical section
                value = seen + 1;
            }
        };
        std::vector<JoinHandle<void>> all;
        for (int i = 0; i < kTasks; ++i) all.push_back(eddy::spawn(worker(mutex, count)));
        for (auto& h : all) co_await std::move(h);
    }(m, counter));
    CHECK(counter == kTasks * kIncrements);
    CHECK_FALSE(m.is_locked());
}

TEST_CASE("unlock hands the mutex to the waiters in the order they asked") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Mutex m;
    std::vector<int> order;
    const bool barged = rt.block_on([](Mutex& mutex, std::vector<int>& trace) -> Task<bool> {
        std::optional<MutexGuard> held = mutex.try_lock();
        std::vector<JoinHandle<void>> waiters;
        for (int id = 1; id <= 5; ++id) {
            waiters.push_back(eddy::spawn(take_turn(mutex, trace, id)));
            co_await settle();  // each is queued before the next starts
        }
        held.reset();                                     // hands over to waiter 1; the mutex stays locked
        const bool taken = mutex.try_lock().has_value();  // no barging past the queue
        for (auto& h : waiters) co_await std::move(h);
        co_return taken;
    }(m, order));
    CHECK_FALSE(barged);
    CHECK(order == std::vector<int>{1, 2, 3, 4, 5});
    CHECK_FALSE(m.is_locked());
}

TEST_CASE("ownership passes in FIFO order under contention across workers") {
    // Waiters queue one by one while a holder keeps the lock, on a four-worker runtime: the
    // order of the handoffs is the order of queueing whatever worker each waiter resumes on.
    Runtime rt(RuntimeConfig{.workers = 4});
    Mutex m;
    std::vector<int> order;
    rt.block_on([](Mutex& mutex, std::vector<int>& trace) -> Task<void> {
        std::optional<MutexGuard> held = co_await mutex.lock();
        std::vector<JoinHandle<void>> waiters;
        for (int id = 1; id <= 8; ++id) {
            // The lock is held, so a waiter can only queue; wait until it has (bounded).
            waiters.push_back(eddy::spawn(take_turn(mutex, trace, id)));
            const auto deadline = std::chrono::steady_clock::now() + eddy::test::kDeadline;
            while (mutex.waiters() < static_cast<std::size_t>(id) && !eddy::test::past(deadline))
                co_await eddy::yield_now();
        }
        held.reset();
        for (auto& h : waiters) co_await std::move(h);
    }(m, order));
    CHECK(order == std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8});
}

TEST_CASE("try_lock succeeds only on a free mutex; guards unlock on destruction, early, and when moved") {
    Mutex m;
    std::optional<MutexGuard> a = m.try_lock();
    REQUIRE(a.has_value());
    CHECK(a->owns_lock());
    CHECK(m.is_locked());
    CHECK_FALSE(m.try_lock().has_value());
    MutexGuard moved = std::move(*a);
    CHECK_FALSE(a->owns_lock());
    CHECK(moved.owns_lock());
    a.reset();  // a moved-from guard unlocks nothing
    CHECK(m.is_locked());
    moved.unlock();
    CHECK_FALSE(moved.owns_lock());
    CHECK_FALSE(m.is_locked());
    moved.unlock();  // idempotent
    {
        std::optional<MutexGuard> b = m.try_lock();
        CHECK(b.has_value());
    }
    CHECK_FALSE(m.is_locked());
}

TEST_CASE("a cancelled waiter leaves the queue; the next waiter gets the lock") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Mutex m;
    std::vector<int> order;
    struct Result {
        std::string cancelled;
        std::string later;
    };
    const Result r = rt.block_on([](Mutex& mutex, std::vector<int>& trace) -> Task<Result> {
        std::optional<MutexGuard> held = mutex.try_lock();
        std::stop_source stop;
        JoinHandle<void> first = eddy::spawn(eddy::with_stop_token(take_turn(mutex, trace, 1), stop.get_token()));
        co_await settle();
        JoinHandle<void> second = eddy::spawn(take_turn(mutex, trace, 2));
        co_await settle();
        stop.request_stop();
        Result result;
        result.cancelled = co_await outcome(std::move(first));
        held.reset();
        result.later = co_await outcome(std::move(second));
        co_return result;
    }(m, order));
    CHECK(r.cancelled == "cancelled");
    CHECK(r.later == "ok");
    CHECK(order == std::vector<int>{2});
    CHECK_FALSE(m.is_locked());
}

TEST_CASE("a stop racing an unlock on two workers never loses the lock") {
    // Either the waiter was handed the lock (and unlocks it) or it was cancelled first (and
    // the unlock freed the mutex): in both cases it ends up free.
    Runtime rt(RuntimeConfig{.workers = 2});
    Mutex m;
    const int stuck = rt.block_on([](Mutex& mutex) -> Task<int> {
        int blocked = 0;
        for (int i = 0; i < 300; ++i) {
            std::optional<MutexGuard> held = co_await mutex.lock();
            std::stop_source stop;
            JoinHandle<void> waiter = eddy::spawn(eddy::with_stop_token(lock_once(mutex), stop.get_token()));
            co_await eddy::yield_now();
            held.reset();
            stop.request_stop();
            const std::string how = co_await outcome(std::move(waiter));
            if (how != "ok" && how != "cancelled") ++blocked;
            if (mutex.is_locked()) ++blocked;
        }
        co_return blocked;
    }(m));
    CHECK(stuck == 0);
}

TEST_CASE("misuse: locking off a worker throws WrongThread") {
    Mutex m;
    std::string how;
    lock_off_worker(m, how);
    CHECK(how == "wrong thread");
    CHECK_FALSE(m.is_locked());
}

}  // TEST_SUITE("sync/mutex")
