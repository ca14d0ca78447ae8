// tests/runtime/join_set_test.cpp: JoinSet<T>: results in completion order, exceptions and
// aborts, abort_all, the set dropped with tasks running, cancellation of join_next, misuse
// and shutdown.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <eddy/eddy.hpp>

#include "support/sync_helpers.hpp"

using eddy::Event;
using eddy::JoinSet;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::test::settle;
using namespace std::chrono_literals;

namespace {

Task<int> after(Event& e, int v) {
    co_await e;
    co_return v;
}

Task<int> value(int v) { co_return v; }

Task<int> fails(std::string what) {
    throw std::runtime_error(what);
    co_return 0;
}

Task<void> touch(std::atomic<int>& n) {
    n.fetch_add(1);
    co_return;
}

}  // namespace

TEST_CASE("join_next gives results in the order the tasks finish, then nullopt") {
    Runtime rt(RuntimeConfig{.workers = 1});
    std::vector<int> order = rt.block_on([]() -> Task<std::vector<int>> {
        Event e1, e2, e3;
        JoinSet<int> set;
        set.spawn(after(e1, 1));
        set.spawn(after(e2, 2));
        set.spawn(after(e3, 3));
        CHECK(set.size() == 3);
        co_await settle();
        std::vector<int> got;
        e2.set();
        got.push_back(*co_await set.join_next());
        e3.set();
        got.push_back(*co_await set.join_next());
        e1.set();
        got.push_back(*co_await set.join_next());
        CHECK_FALSE((co_await set.join_next()).has_value());
        CHECK(set.empty());
        co_return got;
    }());
    CHECK(order == std::vector<int>{2, 3, 1});
}

TEST_CASE("many tasks on two workers: every result is taken exactly once") {
    Runtime rt(RuntimeConfig{.workers = 2});
    std::multiset<int> got = rt.block_on([]() -> Task<std::multiset<int>> {
        JoinSet<int> set;
        for (int i = 0; i < 1000; ++i) set.spawn(value(i));
        std::multiset<int> all;
        while (auto v = co_await set.join_next()) all.insert(*v);
        co_return all;
    }());
    REQUIRE(got.size() == 1000);
    int i = 0;
    for (int v : got) CHECK(v == i++);
}

TEST_CASE("a task's exception is rethrown by the join_next that takes it; the set goes on") {
    Runtime rt(RuntimeConfig{.workers = 1});
    rt.block_on([]() -> Task<void> {
        JoinSet<int> set;
        set.spawn(fails("first"));
        co_await settle();
        set.spawn(value(5));
        co_await settle();
        CHECK(set.size() == 2);
        CHECK_THROWS_WITH_AS(co_await set.join_next(), "first", std::runtime_error);
        auto v = co_await set.join_next();
        REQUIRE(v.has_value());
        CHECK(*v == 5);
        CHECK_FALSE(set.try_join_next().has_value());
    }());
}

TEST_CASE("abort_all cancels the running tasks, which then report TaskAborted; finished ones keep their result") {
    Event never;
    std::atomic<int> cancelled{0};
    Runtime rt(RuntimeConfig{.workers = 2});
    rt.block_on([](Event& never_set, std::atomic<int>& cancels) -> Task<void> {
        JoinSet<int> set;
        set.spawn(value(9));
        for (int i = 0; i < 10; ++i) set.spawn(eddy::test::wait_counting_cancel(never_set, cancels));
        while (set.try_join_next() == std::nullopt) co_await eddy::yield_now();  // 9 finished...
        co_await settle();
        set.abort_all();
        int aborted = 0;
        for (;;) {
            try {
                if (!co_await set.join_next()) break;
            } catch (const eddy::TaskAborted&) {
                ++aborted;
            }
        }
        CHECK(aborted == 10);
    }(never, cancelled));
    CHECK(cancelled.load() == 10);
}

TEST_CASE("one AbortHandle from spawn aborts one task only") {
    Event go;
    Event never;
    std::atomic<int> cancelled{0};
    Runtime rt(RuntimeConfig{.workers = 1});
    rt.block_on([](Event& start, Event& never_set, std::atomic<int>& cancels) -> Task<void> {
        JoinSet<int> set;
        eddy::AbortHandle a = set.spawn(eddy::test::wait_counting_cancel(never_set, cancels));
        set.spawn(after(start, 4));
        co_await settle();
        a.abort();
        CHECK_THROWS_AS(co_await set.join_next(), eddy::TaskAborted);
        start.set();
        CHECK(*co_await set.join_next() == 4);
    }(go, never, cancelled));
    CHECK(cancelled.load() == 1);
}

TEST_CASE("dropping the set aborts its tasks; they unwind on their own") {
    Event never;
    std::atomic<int> cancelled{0};
    Runtime rt(RuntimeConfig{.workers = 2});
    rt.block_on([](Event& never_set, std::atomic<int>& cancels) -> Task<void> {
        {
            JoinSet<int> set;
            for (int i = 0; i < 5; ++i) set.spawn(eddy::test::wait_counting_cancel(never_set, cancels));
            co_await settle();
        }
        for (int i = 0; i < 2000 && cancels.load() < 5; ++i) co_await eddy::sleep(1ms);
    }(never, cancelled));
    CHECK(cancelled.load() == 5);
}

TEST_CASE("a cancelled join_next takes nothing; the result stays for the next one") {
    Runtime rt(RuntimeConfig{.workers = 1});
    rt.block_on([]() -> Task<void> {
        Event e;
        JoinSet<int> set;
        set.spawn(after(e, 8));
        std::stop_source stop;
        stop.request_stop();
        CHECK_THROWS_AS(co_await eddy::with_stop_token(
                            [](JoinSet<int>& s) -> Task<std::optional<int>> { co_return co_await s.join_next(); }(set),
                            stop.get_token()),
                        eddy::OperationCancelled);
        // A join_next waiting when its cancel comes: the wait ends, nothing is taken.
        bool timed_out = false;
        try {
            (void)co_await eddy::with_timeout(
                [](JoinSet<int>& s) -> Task<std::optional<int>> { co_return co_await s.join_next(); }(set), 20ms);
        } catch (const eddy::TimedOut&) {
            timed_out = true;
        }
        CHECK(timed_out);
        CHECK(set.size() == 1);
        e.set();
        CHECK(*co_await set.join_next() == 8);
    }());
}

TEST_CASE("JoinSet<void> counts finished tasks") {
    std::atomic<int> n{0};
    Runtime rt(RuntimeConfig{.workers = 2});
    int joined = rt.block_on([](std::atomic<int>& count) -> Task<int> {
        JoinSet<void> set;
        for (int i = 0; i < 100; ++i) set.spawn(touch(count));
        int k = 0;
        while (co_await set.join_next()) ++k;
        co_return k;
    }(n));
    CHECK(joined == 100);
    CHECK(n.load() == 100);
}

TEST_CASE("misuse: off a worker, an empty task, a moved-from set") {
    JoinSet<int> set;
    CHECK_THROWS_AS(set.spawn(value(1)), eddy::WrongThread);
    CHECK(set.empty());
    Runtime rt(RuntimeConfig{.workers = 1});
    rt.block_on([]() -> Task<void> {
        JoinSet<int> s;
        CHECK_THROWS_AS(s.spawn(Task<int>{}), eddy::BrokenTask);
        JoinSet<int> t = std::move(s);
        CHECK_THROWS_AS((void)s.join_next(), eddy::BrokenTask);
        CHECK(s.size() == 0);
        t.spawn(value(3));
        CHECK(*co_await t.join_next() == 3);
    }());
}

TEST_CASE("shutdown with set members still waiting destroys them without a leak") {
    Event never;
    std::atomic<int> cancelled{0};
    auto set = std::make_unique<JoinSet<int>>();
    {
        Runtime rt(RuntimeConfig{.workers = 2});
        rt.block_on([](JoinSet<int>& tasks, Event& never_set, std::atomic<int>& cancels) -> Task<void> {
            for (int i = 0; i < 10; ++i) tasks.spawn(eddy::test::wait_counting_cancel(never_set, cancels));
            co_await settle();
        }(*set, never, cancelled));
    }
    CHECK(cancelled.load() == 0);
    CHECK(set->size() == 10);  // destroyed by shutdown, never finished
    set.reset();
}
