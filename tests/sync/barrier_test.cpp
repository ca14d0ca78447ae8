// tests/sync/barrier_test.cpp: eddy::Barrier: a generation completes at the n-th arrival,
// with exactly one leader (the last to arrive), and the barrier is reused generation after
// generation across workers; a cancelled arrival is withdrawn (the generation still needs n),
// a completion that won the race is delivered; runtime shutdown while tasks wait; misuse.
//
// Tests that need "these tasks are waiting now" use one worker and eddy::test::settle(),
// where that is exact.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <eddy/sync/barrier.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/counted.hpp"
#include "support/off_worker.hpp"
#include "support/sync_helpers.hpp"
#include "support/waiting.hpp"

using eddy::Barrier;
using eddy::BarrierResult;
using eddy::JoinHandle;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::test::outcome;
using eddy::test::settle;

namespace {

Task<bool> arrive(Barrier& b) { co_return (co_await b.arrive_and_wait()).is_leader(); }

Task<void> arrive_counted(Barrier& b, eddy::test::Counted) { (void)co_await b.arrive_and_wait(); }

/// Awaits `h`: "leader", "follower", or how it failed.
Task<std::string> role(JoinHandle<bool> h) {
    try {
        co_return (co_await std::move(h)) ? "leader" : "follower";
    } catch (...) {
        co_return eddy::test::describe(std::current_exception());
    }
}

}  // namespace

TEST_SUITE("sync/barrier") {

TEST_CASE("the n-th arrival completes the generation as its leader; the others wait for it") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Barrier b(3);
    CHECK(b.parties() == 3);
    struct Result {
        std::size_t waiting_before_last = 0;
        bool early = true;
        bool last_leads = false;
        std::string first, second;
        std::uint64_t generation = 0;
        std::size_t waiting_after = 1;
    };
    const Result r = rt.block_on([](Barrier& barrier) -> Task<Result> {
        JoinHandle<bool> first = eddy::spawn(arrive(barrier));
        co_await settle();
        JoinHandle<bool> second = eddy::spawn(arrive(barrier));
        co_await settle();
        Result result;
        result.waiting_before_last = barrier.waiting();
        result.early = first.is_finished() || second.is_finished() || barrier.generation() != 0;
        result.last_leads = (co_await barrier.arrive_and_wait()).is_leader();  // does not suspend
        result.generation = barrier.generation();
        result.waiting_after = barrier.waiting();
        result.first = co_await role(std::move(first));
        result.second = co_await role(std::move(second));
        co_return result;
    }(b));
    CHECK(r.waiting_before_last == 2);
    CHECK_FALSE(r.early);
    CHECK(r.last_leads);
    CHECK(r.first == "follower");
    CHECK(r.second == "follower");
    CHECK(r.generation == 1);
    CHECK(r.waiting_after == 0);
}

TEST_CASE("Barrier(1): every arrival is a generation of its own, led by itself") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Barrier b(1);
    const int leaders = rt.block_on([](Barrier& barrier) -> Task<int> {
        int count = 0;
        for (int i = 0; i < 5; ++i) count += (co_await barrier.arrive_and_wait()).is_leader() ? 1 : 0;
        co_return count;
    }(b));
    CHECK(leaders == 5);
    CHECK(b.generation() == 5);
}

TEST_CASE("the barrier is reused: on four workers every generation has all n tasks and exactly one leader") {
    Runtime rt(RuntimeConfig{.workers = 4});
    constexpr int kTasks = 8, kGenerations = 50;
    Barrier b(kTasks);
    std::array<std::atomic<int>, kGenerations> arrived{}, leaders{};
    std::atomic<int> short_generations{0};
    rt.block_on([](Barrier& barrier, std::array<std::atomic<int>, kGenerations>& arrivals,
                   std::array<std::atomic<int>, kGenerations>& leader_counts,
                   std::atomic<int>& short_gens) -> Task<void> {
        auto member = [](Barrier& bar, std::array<std::atomic<int>, kGenerations>& arr,
                         std::array<std::atomic<int>, kGenerations>& leads, std::atomic<int>& shorts) -> Task<void> {
            for (int g = 0; g < kGenerations; ++g) {
                arr[g].fetch_add(1);
                const BarrierResult r = co_await bar.arrive_and_wait();
                if (arr[g].load() != kTasks) shorts.fetch_add(1);  // all of it is here
                if (r.is_leader()) leads[g].fetch_add(1);
                if (g % 3 == 0) co_await eddy::yield_now();
            }
        };
        std::vector<JoinHandle<void>> all;
        for (int i = 0; i < kTasks; ++i)
            all.push_back(eddy::spawn(member(barrier, arrivals, leader_counts, short_gens)));
        for (auto& h : all) co_await std::move(h);
    }(b, arrived, leaders, short_generations));
    CHECK(short_generations.load() == 0);
    int wrong = 0;
    for (auto& l : leaders) wrong += l.load() == 1 ? 0 : 1;
    CHECK(wrong == 0);
    CHECK(b.generation() == kGenerations);
    CHECK(b.waiting() == 0);
}

TEST_CASE("a cancelled arrival is withdrawn: the generation still needs n arrivals") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Barrier b(3);
    struct Result {
        std::string cancelled, a, c;
        std::size_t waiting_after_cancel = 0;
        bool completed_early = true;
        bool last_leads = false;
    };
    const Result r = rt.block_on([](Barrier& barrier) -> Task<Result> {
        std::stop_source stop;
        JoinHandle<bool> x = eddy::spawn(eddy::with_stop_token(arrive(barrier), stop.get_token()));
        co_await settle();
        JoinHandle<bool> a = eddy::spawn(arrive(barrier));
        co_await settle();
        stop.request_stop();
        Result result;
        result.cancelled = co_await role(std::move(x));
        result.waiting_after_cancel = barrier.waiting();
        JoinHandle<bool> c = eddy::spawn(arrive(barrier));  // the third arrival, but only two are there
        co_await settle();
        result.completed_early = a.is_finished() || c.is_finished() || barrier.generation() != 0;
        result.last_leads = (co_await barrier.arrive_and_wait()).is_leader();
        result.a = co_await role(std::move(a));
        result.c = co_await role(std::move(c));
        co_return result;
    }(b));
    CHECK(r.cancelled == "cancelled");
    CHECK(r.waiting_after_cancel == 1);
    CHECK_FALSE(r.completed_early);
    CHECK(r.last_leads);
    CHECK(r.a == "follower");
    CHECK(r.c == "follower");
    CHECK(b.generation() == 1);
}

TEST_CASE("an arrival whose generation completed before its cancel took effect returns normally") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Barrier b(2);
    const std::string how = rt.block_on([](Barrier& barrier) -> Task<std::string> {
        std::stop_source stop;
        JoinHandle<bool> x = eddy::spawn(eddy::with_stop_token(arrive(barrier), stop.get_token()));
        co_await settle();
        const bool led = (co_await barrier.arrive_and_wait()).is_leader();  // completes x's generation...
        stop.request_stop();                                                // ...before the stop
        co_return (led ? "" : "not leader, ") + co_await role(std::move(x));
    }(b));
    CHECK(how == "follower");
    CHECK(b.generation() == 1);
}

TEST_CASE("awaiting under a stopped token throws at once and does not arrive") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Barrier b(2);
    std::stop_source stop;
    stop.request_stop();
    CHECK(rt.block_on(role(rt.spawn(eddy::with_stop_token(arrive(b), stop.get_token())))) == "cancelled");
    CHECK(b.waiting() == 0);
    CHECK(b.generation() == 0);
}

TEST_CASE("stops racing the last arrival on two workers: a generation never completes short") {
    // Each round: x (cancellable) arrives at a barrier of 2, y arrives while another task
    // stops x. Either x and y formed a generation (one of them leads), or x was withdrawn (or
    // never arrived) and y waits, alone, until this task arrives.
    Runtime rt(RuntimeConfig{.workers = 2});
    Barrier b(2);
    struct Result {
        int bad = 0, together = 0, withdrawn = 0;
    };
    const Result r = rt.block_on([](Barrier& barrier) -> Task<Result> {
        Result result;
        for (int i = 0; i < 300; ++i) {
            const std::uint64_t gen = barrier.generation();
            std::stop_source stop;
            JoinHandle<bool> x = eddy::spawn(eddy::with_stop_token(arrive(barrier), stop.get_token()));
            co_await eddy::yield_now();
            auto stop_it = [](std::stop_source s) -> Task<void> {
                s.request_stop();
                co_return;
            };
            // The last spawned runs first here unless the other worker steals one: alternate.
            std::optional<JoinHandle<void>> stopper;
            if (i % 2 == 0) stopper.emplace(eddy::spawn(stop_it(stop)));
            JoinHandle<bool> y = eddy::spawn(arrive(barrier));
            if (i % 2 != 0) stopper.emplace(eddy::spawn(stop_it(stop)));
            const std::string xr = co_await role(std::move(x));
            co_await std::move(*stopper);
            if (xr == "follower" || xr == "leader") {  // one generation of the two: one leads
                const std::string yr = co_await role(std::move(y));
                if (yr == xr || (yr != "leader" && yr != "follower")) ++result.bad;
                ++result.together;
            } else if (xr == "cancelled") {
                // y must not finish on its own; wait until it waits (bounded).
                const auto deadline = std::chrono::steady_clock::now() + eddy::test::kDeadline;
                while (barrier.waiting() == 0 && !y.is_finished() && !eddy::test::past(deadline))
                    co_await eddy::yield_now();
                if (y.is_finished() || barrier.waiting() != 1 || barrier.generation() != gen) ++result.bad;
                if (!(co_await barrier.arrive_and_wait()).is_leader()) ++result.bad;
                if (co_await role(std::move(y)) != "follower") ++result.bad;
                ++result.withdrawn;
            } else {
                ++result.bad;
            }
            if (barrier.generation() != gen + 1 || barrier.waiting() != 0) ++result.bad;
        }
        co_return result;
    }(b));
    CHECK(r.bad == 0);
    CHECK(r.together + r.withdrawn == 300);
    CHECK(b.generation() == 300);
}

TEST_CASE("a runtime destroyed while tasks wait withdraws their arrivals and unlinks them") {
    eddy::test::LifetimeCounter frames;
    Barrier b(5);
    {
        Runtime rt(RuntimeConfig{.workers = 2});
        for (int i = 0; i < 4; ++i) (void)rt.spawn(arrive_counted(b, eddy::test::Counted(frames)));
        const auto deadline = std::chrono::steady_clock::now() + eddy::test::kDeadline;
        while (b.waiting() < 4 && !eddy::test::past(deadline)) std::this_thread::yield();
        REQUIRE(b.waiting() == 4);
    }
    CHECK(frames.alive() == 0);
    CHECK(b.waiting() == 0);
    CHECK(b.generation() == 0);
    // A new runtime: the 4 destroyed arrivals do not count; 5 new ones complete a generation.
    Runtime rt(RuntimeConfig{.workers = 1});
    const int leaders = rt.block_on([](Barrier& barrier) -> Task<int> {
        std::vector<JoinHandle<bool>> all;
        for (int i = 0; i < 4; ++i) all.push_back(eddy::spawn(arrive(barrier)));
        co_await settle();
        int count = barrier.generation() == 0 ? 0 : 100;  // four arrivals must not complete it
        count += (co_await barrier.arrive_and_wait()).is_leader() ? 1 : 0;
        for (auto& h : all) count += (co_await std::move(h)) ? 1 : 0;
        co_return count;
    }(b));
    CHECK(leaders == 1);
    CHECK(b.generation() == 1);
}

TEST_CASE("misuse: Barrier(0) throws invalid_argument; arriving off a worker throws WrongThread and does not arrive") {
    CHECK_THROWS_AS(Barrier(0), std::invalid_argument);

    Barrier b(2);
    std::string how;
    eddy::test::await_off_worker([&b] { return b.arrive_and_wait(); }, how);
    CHECK(how == "wrong thread");
    CHECK(b.waiting() == 0);
    Runtime rt(RuntimeConfig{.workers = 1});
    const bool alone_completed = rt.block_on([](Barrier& barrier) -> Task<bool> {
        JoinHandle<bool> one = eddy::spawn(arrive(barrier));
        co_await settle();
        const bool done = one.is_finished();  // the refused arrival did not count
        (void)co_await barrier.arrive_and_wait();
        co_await std::move(one);
        co_return done;
    }(b));
    CHECK_FALSE(alone_completed);
    CHECK(b.generation() == 1);
}

}  // TEST_SUITE("sync/barrier")
