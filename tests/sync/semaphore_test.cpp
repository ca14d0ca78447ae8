// tests/sync/semaphore_test.cpp: eddy::Semaphore: counting, FIFO without starvation,
// try_acquire, a bound on concurrency across workers, cancellation that loses no permit, and
// misuse.
#include <doctest/doctest.h>

#include <atomic>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/sync/semaphore.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/sync_helpers.hpp"
#include "support/waiting.hpp"

using eddy::JoinHandle;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Semaphore;
using eddy::Task;
using eddy::test::Eager;
using eddy::test::outcome;
using eddy::test::settle;

namespace {

/// Acquires `n`, records `id`, and keeps the permits.
Task<void> acquire_and_log(Semaphore& s, std::size_t n, std::vector<int>& order, int id) {
    co_await s.acquire(n);
    order.push_back(id);
}

Task<void> acquire(Semaphore& s, std::size_t n) { co_await s.acquire(n); }

Eager acquire_off_worker(Semaphore& s, std::string& how) {
    try {
        co_await s.acquire();
        how = "ok";
    } catch (const eddy::WrongThread&) {
        how = "wrong thread";
    }
}

}  // namespace

TEST_SUITE("sync/semaphore") {

TEST_CASE("try_acquire and release count permits; acquire(0) always succeeds") {
    Semaphore s(3);
    CHECK(s.available() == 3);
    CHECK(s.try_acquire(2));
    CHECK_FALSE(s.try_acquire(2));
    CHECK(s.try_acquire());
    CHECK(s.available() == 0);
    CHECK(s.try_acquire(0));
    s.release(3);
    CHECK(s.available() == 3);
    s.release();  // permits are not owned: the count may grow
    CHECK(s.available() == 4);
}

TEST_CASE("acquire(0) and try_acquire(0) succeed at once even behind a waiting large request") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Semaphore s(0);
    rt.block_on([](Semaphore& sem) -> Task<void> {
        auto big = eddy::spawn([](Semaphore& x) -> Task<void> { co_await x.acquire(5); }(sem));
        co_await settle();  // the big request waits at the head
        CHECK(sem.try_acquire(0));
        co_await sem.acquire(0);  // does not queue behind it
        sem.release(5);
        co_await std::move(big);
    }(s));
    CHECK(s.available() == 0);
}

TEST_CASE("at most N tasks hold a permit at once on four workers") {
    Runtime rt(RuntimeConfig{.workers = 4});
    Semaphore s(3);
    std::atomic<int> inside{0}, most{0}, done{0};
    rt.block_on([](Semaphore& sem, std::atomic<int>& holders, std::atomic<int>& peak,
                   std::atomic<int>& finished) -> Task<void> {
        auto worker = [](Semaphore& permits, std::atomic<int>& occupancy, std::atomic<int>& high_water,
                         std::atomic<int>& ended) -> Task<void> {
            for (int i = 0; i < 50; ++i) {
                co_await permits.acquire();
                const int now = occupancy.fetch_add(1) + 1;
                int seen = high_water.load();
                while (now > seen && !high_water.compare_exchange_weak(seen, now)) {
                }
                co_await eddy::yield_now();
                occupancy.fetch_sub(1);
                permits.release();
            }
            ended.fetch_add(1);
        };
        std::vector<JoinHandle<void>> all;
        for (int i = 0; i < 32; ++i) all.push_back(eddy::spawn(worker(sem, holders, peak, finished)));
        for (auto& h : all) co_await std::move(h);
    }(s, inside, most, done));
    CHECK(done.load() == 32);
    CHECK(most.load() <= 3);
    CHECK(s.available() == 3);
}

TEST_CASE("a large request at the head blocks smaller ones behind it (FIFO, no starvation)") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Semaphore s(1);
    std::vector<int> order;
    const bool small_got_through = rt.block_on([](Semaphore& sem, std::vector<int>& trace) -> Task<bool> {
        JoinHandle<void> big = eddy::spawn(acquire_and_log(sem, 3, trace, 1));
        co_await settle();
        JoinHandle<void> small = eddy::spawn(acquire_and_log(sem, 1, trace, 2));
        co_await settle();
        const bool through = !trace.empty() || sem.try_acquire(1);  // one permit free, but the head waits
        sem.release(2);  // 3 free: the big one goes, the small one waits for more
        co_await std::move(big);
        co_await settle();
        trace.push_back(0);
        sem.release(1);
        co_await std::move(small);
        co_return through;
    }(s, order));
    CHECK_FALSE(small_got_through);
    CHECK(order == std::vector<int>{1, 0, 2});
    CHECK(s.available() == 0);
}

TEST_CASE("a cancelled waiter loses no permit and passes on the ones it held up") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Semaphore s(2);
    std::vector<int> order;
    struct Result {
        std::string cancelled;
        std::size_t available_after_cancel = 0;
        std::size_t available_at_end = 0;
    };
    const Result r = rt.block_on([](Semaphore& sem, std::vector<int>& trace) -> Task<Result> {
        std::stop_source stop;
        // The head needs 3 of the 2 permits: the two small waiters behind it are blocked.
        JoinHandle<void> big = eddy::spawn(eddy::with_stop_token(acquire_and_log(sem, 3, trace, 1), stop.get_token()));
        co_await settle();
        JoinHandle<void> a = eddy::spawn(acquire_and_log(sem, 1, trace, 2));
        co_await settle();
        JoinHandle<void> b = eddy::spawn(acquire_and_log(sem, 1, trace, 3));
        co_await settle();
        Result result;
        stop.request_stop();
        result.cancelled = co_await outcome(std::move(big));
        co_await std::move(a);  // the cancel passed the 2 permits on
        co_await std::move(b);
        result.available_after_cancel = sem.available();
        sem.release(2);  // what a and b hold
        result.available_at_end = sem.available();
        co_return result;
    }(s, order));
    CHECK(r.cancelled == "cancelled");
    CHECK(order == std::vector<int>{2, 3});
    CHECK(r.available_after_cancel == 0);
    CHECK(r.available_at_end == 2);
}

TEST_CASE("stops racing releases on two workers lose and duplicate no permit") {
    Runtime rt(RuntimeConfig{.workers = 2});
    Semaphore s(0);
    const std::size_t left = rt.block_on([](Semaphore& sem) -> Task<std::size_t> {
        std::size_t granted = 0;
        for (int i = 0; i < 300; ++i) {
            std::stop_source stop;
            JoinHandle<void> waiter = eddy::spawn(eddy::with_stop_token(acquire(sem, 1), stop.get_token()));
            co_await eddy::yield_now();
            sem.release(1);
            stop.request_stop();
            if (co_await outcome(std::move(waiter)) == "ok") ++granted;
        }
        // Every release went either to a waiter (granted) or stayed in the semaphore.
        co_return sem.available() + granted;
    }(s));
    CHECK(left == 300);
}

TEST_CASE("misuse: acquiring off a worker throws WrongThread and takes nothing") {
    Semaphore s(1);
    std::string how;
    acquire_off_worker(s, how);
    CHECK(how == "wrong thread");
    CHECK(s.available() == 1);
}

}  // TEST_SUITE("sync/semaphore")
