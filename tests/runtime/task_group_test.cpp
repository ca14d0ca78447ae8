// tests/runtime/task_group_test.cpp: eddy::TaskGroup (task_group): completion after the body
// and every child, children spawned from anywhere in the group, parallelism, the failure
// policy (the first failure cancels the rest and is rethrown), cancel(), cancellation from
// the awaiter, frames freed as children finish, and shutdown with a group running.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>

#include <eddy/time/sleep.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/task_group.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/counted.hpp"
#include "support/net_helpers.hpp"
#include "support/sleeper.hpp"

using eddy::OperationCancelled;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::TaskGroup;
using eddy::test::Counted;
using eddy::test::LifetimeCounter;
using eddy::test::run;
using eddy::test::sleeper;
using namespace std::chrono_literals;

namespace {

Task<void> add(std::atomic<int>& n, int v) {
    co_await eddy::yield_now();
    n.fetch_add(v);
}

Task<void> fail_after(std::chrono::milliseconds d) {
    co_await eddy::sleep(d);
    throw std::runtime_error("child failed");
}

Task<void> nap() { co_await eddy::sleep(std::chrono::hours(1)); }

}  // namespace

TEST_CASE("a group completes after its body and every child, and children run") {
    Runtime rt(RuntimeConfig{.workers = 2});
    std::atomic<int> sum{0};
    run(rt, eddy::task_group([&](TaskGroup& g) -> Task<void> {
            for (int i = 1; i <= 100; ++i) g.spawn(add(sum, i));
            co_return;
        }));
    CHECK(sum.load() == 5050);
}

TEST_CASE("children may spawn further children into the group") {
    Runtime rt(RuntimeConfig{.workers = 2});
    std::atomic<int> leaves{0};
    struct Tree {
        static Task<void> grow(TaskGroup& g, std::atomic<int>& leaves, int depth) {
            if (depth == 0) {
                leaves.fetch_add(1);
                co_return;
            }
            g.spawn(grow(g, leaves, depth - 1));
            g.spawn(grow(g, leaves, depth - 1));
            co_return;
        }
    };
    run(rt, eddy::task_group([&](TaskGroup& g) -> Task<void> {
            g.spawn(Tree::grow(g, leaves, 10));
            co_return;
        }));
    CHECK(leaves.load() == 1024);
}

TEST_CASE("the children of a group run in parallel on different workers") {
    Runtime rt(RuntimeConfig{.workers = 2});
    std::atomic<int> started{0};
    std::atomic<int> met{0};
    run(rt, eddy::task_group([&](TaskGroup& g) -> Task<void> {
            for (int i = 0; i < 2; ++i)
                g.spawn([](std::atomic<int>& s, std::atomic<int>& m) -> Task<void> {
                    if (co_await eddy::test::rendezvous(s, 2)) m.fetch_add(1);
                }(started, met));
            co_return;
        }));
    CHECK(met.load() == 2);
}

TEST_CASE("a failing child cancels its sleeping siblings and its exception is rethrown") {
    Runtime rt(RuntimeConfig{.workers = 2});
    LifetimeCounter frames;
    std::atomic<int> cancelled{0};
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH_AS(run(rt, eddy::task_group([&](TaskGroup& g) -> Task<void> {
                                 for (int i = 0; i < 5; ++i) g.spawn(sleeper<void>(frames, cancelled));
                                 g.spawn(fail_after(10ms));
                                 co_await eddy::sleep(1h);  // the body is a member too: cancelled as well
                             })),
                         "child failed", std::runtime_error);
    CHECK(std::chrono::steady_clock::now() - start < 10s);  // not the hour of the sleeps
    CHECK(cancelled.load() == 5);
    CHECK(frames.constructions() == 5);
    CHECK(frames.alive() == 0);  // every sibling stopped before the group rethrew
}

TEST_CASE("an exception from the body cancels the children and is rethrown") {
    Runtime rt(RuntimeConfig{.workers = 2});
    LifetimeCounter frames;
    std::atomic<int> cancelled{0};
    CHECK_THROWS_WITH_AS(run(rt, eddy::task_group([&](TaskGroup& g) -> Task<void> {
                                 g.spawn(sleeper<void>(frames, cancelled));
                                 g.spawn(sleeper<void>(frames, cancelled));
                                 co_await eddy::sleep(5ms);
                                 throw std::logic_error("body failed");
                             })),
                         "body failed", std::logic_error);
    CHECK(cancelled.load() == 2);
    CHECK(frames.alive() == 0);
}

TEST_CASE("cancel() stops every member and the group completes normally") {
    Runtime rt(RuntimeConfig{.workers = 2});
    LifetimeCounter frames;
    std::atomic<int> cancelled{0};
    bool cancelled_seen = false;
    run(rt, eddy::task_group([&](TaskGroup& g) -> Task<void> {
            for (int i = 0; i < 4; ++i) g.spawn(sleeper<void>(frames, cancelled));
            g.spawn([](TaskGroup& group) -> Task<void> {
                co_await eddy::sleep(10ms);
                group.cancel();
            }(g));
            co_await eddy::sleep(1h);  // cancelled too; its OperationCancelled is not a failure
        }));
    cancelled_seen = cancelled.load() == 4;
    CHECK(cancelled_seen);
    CHECK(frames.alive() == 0);
}

TEST_CASE("a child spawned after cancel() starts cancelled") {
    Runtime rt(RuntimeConfig{.workers = 1});
    std::atomic<int> cancelled{0};
    LifetimeCounter frames;
    run(rt, eddy::task_group([&](TaskGroup& g) -> Task<void> {
            g.cancel();
            CHECK(g.cancelled());
            CHECK(g.stop_token().stop_requested());
            g.spawn(sleeper<void>(frames, cancelled));
            co_return;
        }));
    CHECK(cancelled.load() == 1);
}

TEST_CASE("cancelling the group's awaiter cancels every member and the group throws OperationCancelled") {
    Runtime rt(RuntimeConfig{.workers = 2});
    LifetimeCounter frames;
    std::atomic<int> cancelled{0};
    std::stop_source stop;
    auto group = [&]() -> Task<void> {
        co_await eddy::with_stop_token(eddy::task_group([&](TaskGroup& g) -> Task<void> {
                                           for (int i = 0; i < 3; ++i) g.spawn(sleeper<void>(frames, cancelled));
                                           co_return;
                                       }),
                                       stop.get_token());
    };
    CHECK_THROWS_AS(run(rt, eddy::when_all(group(), eddy::test::stop_after(10ms, stop))), OperationCancelled);
    CHECK(cancelled.load() == 3);
    CHECK(frames.alive() == 0);
}

TEST_CASE("a finished child's frame is freed at once, while the group still runs") {
    Runtime rt(RuntimeConfig{.workers = 2});
    LifetimeCounter frames;
    bool freed_while_running = false;
    run(rt, eddy::task_group([&](TaskGroup& g) -> Task<void> {
            for (int i = 0; i < 1000; ++i)
                g.spawn([](LifetimeCounter& f) -> Task<void> {
                    Counted local(f);
                    co_return;
                }(frames));
            const auto deadline = std::chrono::steady_clock::now() + eddy::test::kDeadline;
            while (frames.destructions.load() < 1000 && !eddy::test::past(deadline)) co_await eddy::yield_now();
            freed_while_running = frames.destructions.load() == 1000;  // the body is still a member
        }));
    CHECK(freed_while_running);
}

TEST_CASE("spawning an empty task throws BrokenTask and the group still completes") {
    Runtime rt(RuntimeConfig{.workers = 1});
    std::atomic<int> sum{0};
    bool threw = false;
    run(rt, eddy::task_group([&](TaskGroup& g) -> Task<void> {
            Task<void> empty;
            try {
                g.spawn(std::move(empty));
            } catch (const eddy::BrokenTask&) {
                threw = true;
            }
            g.spawn(add(sum, 1));
            co_return;
        }));
    CHECK(threw);
    CHECK(sum.load() == 1);
}

TEST_CASE("shutting the runtime down with a group running destroys every member") {
    LifetimeCounter frames;
    std::atomic<int> cancelled{0};
    std::atomic<int> started{0};
    {
        Runtime rt(RuntimeConfig{.workers = 2});
        rt.spawn(eddy::task_group([&](TaskGroup& g) -> Task<void> {
              for (int i = 0; i < 8; ++i) g.spawn(sleeper<void>(frames, cancelled));
              started.store(1);
              co_await eddy::sleep(1h);
          }))
            .detach();
        const auto deadline = std::chrono::steady_clock::now() + eddy::test::kDeadline;
        while ((started.load() == 0 || frames.constructions() < 8) && !eddy::test::past(deadline))
            std::this_thread::yield();
        REQUIRE(frames.constructions() == 8);
    }  // shutdown destroys the root task, the group in it, and its sleeping members
    CHECK(frames.alive() == 0);
    CHECK(cancelled.load() == 0);  // destroyed, not cancelled: shutdown runs no task
}

TEST_CASE("supervising: a child's exception goes to the handler and its siblings run on") {
    Runtime rt(RuntimeConfig{.workers = 2});
    std::atomic<int> sum{0};
    std::atomic<int> handled{0};
    run(rt, eddy::task_group(
                [&](TaskGroup& g) -> Task<void> {
                    for (int i = 0; i < 10; ++i) g.spawn(fail_after(1ms));
                    for (int i = 1; i <= 100; ++i) g.spawn(add(sum, i));
                    co_await eddy::sleep(20ms);  // the failures happen while the body still runs
                    g.spawn(add(sum, 1000));     // and the group still takes members
                },
                [&](std::exception_ptr e) {
                    try {
                        std::rethrow_exception(e);
                    } catch (const std::runtime_error& x) {
                        if (std::string(x.what()) == "child failed") handled.fetch_add(1);
                    }
                }));
    CHECK(handled.load() == 10);
    CHECK(sum.load() == 6050);
}

TEST_CASE("supervising: the body's exception, or one escaping the handler, still fails the group") {
    Runtime rt(RuntimeConfig{.workers = 2});
    std::atomic<int> handled{0};
    auto on_error = [&](std::exception_ptr) { handled.fetch_add(1); };
    CHECK_THROWS_WITH_AS(run(rt, eddy::task_group(
                                     [](TaskGroup& g) -> Task<void> {
                                         g.spawn(nap());
                                         co_await eddy::yield_now();
                                         throw std::runtime_error("body failed");
                                     },
                                     on_error)),
                         "body failed", std::runtime_error);
    CHECK(handled.load() == 0);  // the sleeper stopped by cancellation: not a failure
    CHECK_THROWS_WITH_AS(run(rt, eddy::task_group(
                                     [](TaskGroup& g) -> Task<void> {
                                         g.spawn(nap());
                                         g.spawn(fail_after(1ms));
                                         co_return;
                                     },
                                     [](std::exception_ptr) { throw std::logic_error("handler failed"); })),
                         "handler failed", std::logic_error);
    CHECK_THROWS_AS(run(rt, eddy::task_group([](TaskGroup&) -> Task<void> { co_return; }, eddy::ChildErrorHandler{})),
                    std::invalid_argument);
}
