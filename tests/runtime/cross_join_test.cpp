// tests/runtime/cross_join_test.cpp: a task of one runtime awaiting the JoinHandle of a task
// of another (frame_header.hpp, "Joins across runtimes"): the joiner resumes on its own
// runtime; a task destroyed by its runtime's shutdown gives its joiner RuntimeStopped; and
// either runtime may be shut down or destroyed while the join is in flight, in every order,
// without touching freed memory (the race rounds are for the ASan and TSan builds).
//
// State shared with tasks is declared before the runtimes, so it outlives them.
#include <doctest/doctest.h>

#include <pthread.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <optional>
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

namespace {

std::string thread_name() {
    char buf[16] = {};
    pthread_getname_np(pthread_self(), buf, sizeof buf);
    return buf;
}

bool on(const char* prefix) { return thread_name().rfind(prefix, 0) == 0; }

RuntimeConfig named(const char* prefix, std::size_t workers = 1) {
    return RuntimeConfig{.workers = workers, .thread_name_prefix = prefix};
}

/// Yields `n` times, then gives `n`.
Task<int> yields(int n) {
    for (int i = 0; i < n; ++i) co_await eddy::yield_now();
    co_return n;
}

/// Yields until `go` is set (forever, unless shutdown destroys it).
Task<int> until(std::atomic<bool>& go) {
    while (!go.load()) co_await eddy::yield_now();
    co_return 7;
}

/// How a join ended: -1 RuntimeStopped, else the value.
Task<int> join(JoinHandle<int> h) {
    try {
        co_return co_await std::move(h);
    } catch (const eddy::RuntimeStopped&) {
        co_return -1;
    }
}

struct Where {
    bool before_on_b = false;
    bool after_on_b = false;
    int value = 0;
};

Task<Where> join_and_look(JoinHandle<int> h) {
    Where w;
    w.before_on_b = on("xjB");
    w.value = co_await std::move(h);
    w.after_on_b = on("xjB");
    co_return w;
}

/// Awaits `h`, counting what happened; `c` lives in the frame (destroyed exactly once).
Task<void> count_join(JoinHandle<int> h, [[maybe_unused]] Counted c, std::atomic<int>& joined,
                      std::atomic<int>& stopped) {
    try {
        (void)co_await std::move(h);
        joined.fetch_add(1);
    } catch (const eddy::RuntimeStopped&) {
        stopped.fetch_add(1);
    }
}

}  // namespace

TEST_CASE("a join across runtimes resumes the joiner on its own runtime") {
    std::atomic<bool> go{false};
    Runtime a(named("xjA", 2));
    Runtime b(named("xjB", 2));
    auto task = a.spawn(until(go));
    auto joiner = b.spawn(join_and_look(std::move(task)));
    for (int i = 0; i < 100; ++i) std::this_thread::yield();  // let the joiner wait, most runs
    go.store(true);
    const Where w =
        b.block_on([](JoinHandle<Where> j) -> Task<Where> { co_return co_await std::move(j); }(std::move(joiner)));
    CHECK(w.value == 7);
    CHECK(w.before_on_b);
    CHECK(w.after_on_b);
}

TEST_CASE("shutting down the task's runtime gives a joiner of another runtime RuntimeStopped") {
    std::atomic<bool> never{false};
    Runtime b(named("xjB"));
    std::optional<Runtime> a(std::in_place, named("xjA"));
    auto joiner = b.spawn(join(a->spawn(until(never))));
    for (int i = 0; i < 100; ++i) std::this_thread::yield();
    SUBCASE("shutdown") { a->shutdown(); }
    SUBCASE("destruction") { a.reset(); }
    CHECK(b.block_on([](JoinHandle<int> j) -> Task<int> { co_return co_await std::move(j); }(std::move(joiner))) == -1);
}

TEST_CASE("destroying the joiner's runtime while it waits leaves the task running") {
    LifetimeCounter frames;
    std::atomic<bool> go{false};
    std::atomic<int> joined{0}, stopped{0};
    Runtime a(named("xjA"));
    auto task = a.spawn(until(go));
    {
        Runtime b(named("xjB"));
        b.spawn(count_join(std::move(task), Counted(frames), joined, stopped)).detach();
        for (int i = 0; i < 100; ++i) std::this_thread::yield();
    }  // the joiner is destroyed, withdrawing from the join
    CHECK(frames.alive() == 0);
    go.store(true);
    // The task finishes with nobody waiting; a's shutdown has nothing of b to touch.
    a.shutdown();
    CHECK(joined.load() == 0);
    CHECK(stopped.load() == 0);
}

// The races: each round starts a join across runtimes and ends one runtime while the join
// may be completing. Every joiner frame is destroyed exactly once; every round ends.
TEST_CASE("joins across runtimes survive the joiner's runtime ending at any moment") {
    constexpr int kRounds = 1000;
    LifetimeCounter frames;
    std::atomic<int> joined{0}, stopped{0};
    Runtime a(named("xjA"));
    for (int i = 0; i < kRounds; ++i) {
        auto task = a.spawn(yields(i % 4));
        Runtime b(named("xjB"));
        b.spawn(count_join(std::move(task), Counted(frames), joined, stopped)).detach();
        for (int k = 0; k < i % 3; ++k) std::this_thread::yield();
        if (i % 2 == 0) b.shutdown();  // shutdown, then destruction; odd rounds: destruction
    }
    CHECK(frames.alive() == 0);
    CHECK(stopped.load() == 0);  // a never shut down: no joiner was told so
    CHECK(joined.load() <= kRounds);
}

TEST_CASE("joins across runtimes survive the task's runtime ending at any moment") {
    constexpr int kRounds = 1000;
    LifetimeCounter frames;
    std::atomic<int> joined{0}, stopped{0};
    Runtime b(named("xjB"));
    std::optional<JoinHandle<void>> joiners[kRounds];
    for (int i = 0; i < kRounds; ++i) {
        Runtime a(named("xjA"));
        joiners[i].emplace(b.spawn(count_join(a.spawn(yields(i % 4)), Counted(frames), joined, stopped)));
        for (int k = 0; k < i % 3; ++k) std::this_thread::yield();
        if (i % 2 == 0) a.shutdown();
    }
    // Every joiner ends: with the value or RuntimeStopped, never stranded.
    for (auto& j : joiners) CHECK(eddy::test::wait_finished(*j));
    CHECK(joined.load() + stopped.load() == kRounds);
    for (auto& j : joiners) j.reset();  // a finished task's frame goes with its handle
    CHECK(frames.alive() == 0);
}

TEST_CASE("joins across runtimes survive both runtimes ending, in either order") {
    constexpr int kRounds = 1000;
    LifetimeCounter frames;
    std::atomic<int> joined{0}, stopped{0};
    for (int i = 0; i < kRounds; ++i) {
        std::optional<Runtime> a(std::in_place, named("xjA"));
        std::optional<Runtime> b(std::in_place, named("xjB"));
        b->spawn(count_join(a->spawn(yields(i % 4)), Counted(frames), joined, stopped)).detach();
        for (int k = 0; k < i % 3; ++k) std::this_thread::yield();
        if (i % 2 == 0) {
            a.reset();
            b.reset();
        } else {
            b.reset();
            a.reset();
        }
    }
    CHECK(frames.alive() == 0);
    CHECK(joined.load() + stopped.load() <= kRounds);
}
