// tests/sync/notify_test.cpp: eddy::Notify: notify_one wakes the first waiter or stores one
// permit (never more), notify_waiters wakes everyone waiting and stores nothing, notifying
// from a plain thread, cancellation (a cancelled wait consumes nothing; a notification that
// won the race is delivered), races on two workers, runtime shutdown while tasks wait (and a
// notification handed to a destroyed frame is passed on), and misuse.
//
// Tests that need "these tasks are waiting now" use one worker and eddy::test::settle(),
// where that is exact.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <eddy/runtime/join_handle.hpp>
#include <eddy/sync/notify.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/counted.hpp"
#include "support/notify_probe.hpp"
#include "support/off_worker.hpp"
#include "support/sync_helpers.hpp"
#include "support/waiting.hpp"

using eddy::JoinHandle;
using eddy::Notify;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::test::outcome;
using eddy::test::settle;
using eddy::test::spend_permit;

namespace {

Task<void> wait_and_log(Notify& n, std::vector<int>& order, int id) {
    co_await n.notified();
    order.push_back(id);
}

Task<void> wait_for(Notify& n) { co_await n.notified(); }

Task<void> wait_and_count(Notify& n, std::atomic<int>& woken, eddy::test::Counted) {
    co_await n.notified();
    woken.fetch_add(1);
}

}  // namespace

TEST_SUITE("sync/notify") {

TEST_CASE("notify_one wakes only the first waiter, in the order they started waiting") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Notify n;
    std::vector<int> order;
    struct Result {
        std::vector<int> after_first;
        std::size_t waiting_after_first = 0;
        std::string permit_at_end;
    };
    const Result r = rt.block_on([](Notify& notify, std::vector<int>& trace) -> Task<Result> {
        std::vector<JoinHandle<void>> all;
        for (int id = 1; id <= 3; ++id) {
            all.push_back(eddy::spawn(wait_and_log(notify, trace, id)));
            co_await settle();
        }
        Result result;
        notify.notify_one();
        co_await settle();
        result.after_first = trace;
        result.waiting_after_first = notify.waiters();
        notify.notify_one();
        co_await settle();  // (two wakes in a row would run newest first: the LIFO slot)
        notify.notify_one();
        for (auto& h : all) co_await std::move(h);
        result.permit_at_end = co_await spend_permit(notify);  // every notify_one went to a waiter
        co_return result;
    }(n, order));
    CHECK(r.after_first == std::vector<int>{1});
    CHECK(r.waiting_after_first == 2);
    CHECK(order == std::vector<int>{1, 2, 3});
    CHECK(r.permit_at_end == "none");
}

TEST_CASE("notify_one with nobody waiting stores one permit, consumed without suspending; permits do not add up") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Notify n;
    struct Result {
        bool second_waits = false;
        std::string after;
    };
    const Result r = rt.block_on([](Notify& notify) -> Task<Result> {
        notify.notify_one();
        notify.notify_one();
        notify.notify_one();         // still one permit
        co_await notify.notified();  // consumes it at once
        Result result;
        JoinHandle<void> second = eddy::spawn(wait_for(notify));
        co_await settle();
        result.second_waits = !second.is_finished() && notify.waiters() == 1;
        notify.notify_one();
        co_await std::move(second);
        result.after = co_await spend_permit(notify);
        co_return result;
    }(n));
    CHECK(r.second_waits);
    CHECK(r.after == "none");
}

TEST_CASE("notify_waiters wakes every task waiting now and stores no permit; a stored permit survives it") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Notify n;
    std::vector<int> order;
    struct Result {
        std::string after_all;
        std::string after_kept;
    };
    const Result r = rt.block_on([](Notify& notify, std::vector<int>& trace) -> Task<Result> {
        std::vector<JoinHandle<void>> all;
        for (int id = 1; id <= 4; ++id) {
            all.push_back(eddy::spawn(wait_and_log(notify, trace, id)));
            co_await settle();
        }
        notify.notify_waiters();
        for (auto& h : all) co_await std::move(h);
        Result result;
        result.after_all = co_await spend_permit(notify);  // nothing stored
        notify.notify_waiters();                           // nobody waits: does nothing
        result.after_all += co_await spend_permit(notify);
        notify.notify_one();      // a permit...
        notify.notify_waiters();  // ...that notify_waiters leaves alone
        result.after_kept = co_await spend_permit(notify);
        co_return result;
    }(n, order));
    CHECK(order == std::vector<int>{1, 2, 3, 4});
    CHECK(r.after_all == "nonenone");
    CHECK(r.after_kept == "permit");
}

TEST_CASE("notify_one and notify_waiters from a thread that is not a worker wake tasks on four workers") {
    Runtime rt(RuntimeConfig{.workers = 4});
    Notify n;
    std::vector<JoinHandle<void>> waiters;
    for (int i = 0; i < 16; ++i) waiters.push_back(rt.spawn(wait_for(n)));
    const auto deadline = std::chrono::steady_clock::now() + eddy::test::kDeadline;
    while (n.waiters() < 16 && !eddy::test::past(deadline)) std::this_thread::yield();
    REQUIRE(n.waiters() == 16);
    std::thread one([&n] { n.notify_one(); });
    one.join();
    std::size_t finished = 0;
    while (finished == 0 && !eddy::test::past(deadline)) {
        finished = 0;
        for (auto& h : waiters) finished += h.is_finished() ? 1 : 0;
        std::this_thread::yield();
    }
    CHECK(finished == 1);
    CHECK(n.waiters() == 15);
    std::thread all([&n] { n.notify_waiters(); });
    all.join();
    for (auto& h : waiters) CHECK(eddy::test::wait_finished(h));
}

TEST_CASE("a cancelled wait consumes nothing: the next notify_one goes to the next waiter, or is stored") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Notify n;
    struct Result {
        std::string first, second, other, permit;
    };
    const Result r = rt.block_on([](Notify& notify) -> Task<Result> {
        Result result;
        std::stop_source stop;
        JoinHandle<void> cancelled = eddy::spawn(eddy::with_stop_token(wait_for(notify), stop.get_token()));
        co_await settle();
        JoinHandle<void> other = eddy::spawn(wait_for(notify));
        co_await settle();
        stop.request_stop();
        result.first = co_await outcome(std::move(cancelled));
        notify.notify_one();  // to the other waiter
        result.other = co_await outcome(std::move(other));

        std::stop_source stop2;
        JoinHandle<void> alone = eddy::spawn(eddy::with_stop_token(wait_for(notify), stop2.get_token()));
        co_await settle();
        stop2.request_stop();
        result.second = co_await outcome(std::move(alone));
        notify.notify_one();  // nobody waits now: stored
        result.permit = co_await spend_permit(notify);
        co_return result;
    }(n));
    CHECK(r.first == "cancelled");
    CHECK(r.other == "ok");
    CHECK(r.second == "cancelled");
    CHECK(r.permit == "permit");
}

TEST_CASE("a wait chosen by notify_one or notify_waiters before its cancel took effect returns normally") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Notify n;
    struct Result {
        std::string by_one, by_waiters, permit;
    };
    const Result r = rt.block_on([](Notify& notify) -> Task<Result> {
        Result result;
        std::stop_source stop;
        JoinHandle<void> a = eddy::spawn(eddy::with_stop_token(wait_for(notify), stop.get_token()));
        co_await settle();
        notify.notify_one();
        stop.request_stop();  // too late: the grant wins
        result.by_one = co_await outcome(std::move(a));
        std::stop_source stop2;
        JoinHandle<void> b = eddy::spawn(eddy::with_stop_token(wait_for(notify), stop2.get_token()));
        co_await settle();
        notify.notify_waiters();
        stop2.request_stop();
        result.by_waiters = co_await outcome(std::move(b));
        result.permit = co_await spend_permit(notify);  // neither was stored as well
        co_return result;
    }(n));
    CHECK(r.by_one == "ok");
    CHECK(r.by_waiters == "ok");
    CHECK(r.permit == "none");
}

TEST_CASE("awaiting under a stopped token throws at once and leaves a stored permit stored") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Notify n;
    n.notify_one();
    std::stop_source stop;
    stop.request_stop();
    CHECK(rt.block_on(outcome(rt.spawn(eddy::with_stop_token(wait_for(n), stop.get_token())))) == "cancelled");
    CHECK(rt.block_on(spend_permit(n)) == "permit");
}

TEST_CASE("a stop racing notify_one on two workers: the notification is delivered or stored, never lost or doubled") {
    Runtime rt(RuntimeConfig{.workers = 2});
    Notify n;
    struct Result {
        int bad = 0, delivered = 0, stored = 0;
    };
    const Result r = rt.block_on([](Notify& notify) -> Task<Result> {
        Result result;
        for (int i = 0; i < 300; ++i) {
            std::stop_source stop;
            JoinHandle<void> waiter = eddy::spawn(eddy::with_stop_token(wait_for(notify), stop.get_token()));
            co_await eddy::yield_now();
            // The last spawned runs first here unless the other worker steals one: alternate.
            auto stop_it = [](std::stop_source s) -> Task<void> {
                s.request_stop();
                co_return;
            };
            auto notify_it = [](Notify& target) -> Task<void> {
                target.notify_one();
                co_return;
            };
            JoinHandle<void> first = i % 2 == 0 ? eddy::spawn(stop_it(stop)) : eddy::spawn(notify_it(notify));
            JoinHandle<void> second = i % 2 == 0 ? eddy::spawn(notify_it(notify)) : eddy::spawn(stop_it(stop));
            const std::string how = co_await outcome(std::move(waiter));
            co_await std::move(first);
            co_await std::move(second);
            const std::string permit = co_await spend_permit(notify);
            if (how == "ok" && permit == "none") {
                ++result.delivered;
            } else if (how == "cancelled" && permit == "permit") {
                ++result.stored;
            } else {
                ++result.bad;
            }
        }
        co_return result;
    }(n));
    CHECK(r.bad == 0);
    CHECK(r.delivered + r.stored == 300);
}

TEST_CASE("a runtime destroyed while tasks wait unlinks them; a notify_one handed to a destroyed frame goes on") {
    eddy::test::LifetimeCounter frames;
    Notify n;
    std::atomic<int> woken{0};
    {
        Runtime rt(RuntimeConfig{.workers = 2});
        for (int i = 0; i < 8; ++i) (void)rt.spawn(wait_and_count(n, woken, eddy::test::Counted(frames)));
        const auto deadline = std::chrono::steady_clock::now() + eddy::test::kDeadline;
        while (n.waiters() < 8 && !eddy::test::past(deadline)) std::this_thread::yield();
        REQUIRE(n.waiters() == 8);
    }
    CHECK(frames.alive() == 0);
    CHECK(n.waiters() == 0);
    CHECK(woken.load() == 0);

    // notify_one from this thread grants the first waiter, and the runtime is destroyed at
    // once: either a waiter ran (and consumed it) or it ends as the stored permit.
    for (int round = 0; round < 20; ++round) {
        Notify m;
        std::atomic<int> got{0};
        {
            Runtime rt(RuntimeConfig{.workers = 2});
            for (int i = 0; i < 4; ++i) (void)rt.spawn(wait_and_count(m, got, eddy::test::Counted(frames)));
            const auto deadline = std::chrono::steady_clock::now() + eddy::test::kDeadline;
            while (m.waiters() < 4 && !eddy::test::past(deadline)) std::this_thread::yield();
            REQUIRE(m.waiters() == 4);
            m.notify_one();
        }
        CHECK(frames.alive() == 0);
        CHECK(m.waiters() == 0);
        Runtime rt(RuntimeConfig{.workers = 1});
        const std::string permit = rt.block_on(spend_permit(m));
        CHECK(got.load() + (permit == "permit" ? 1 : 0) == 1);
    }
}

TEST_CASE("misuse: awaiting off a worker throws WrongThread and consumes no permit") {
    Notify n;
    n.notify_one();
    std::string how;
    eddy::test::await_off_worker([&n] { return n.notified(); }, how);
    CHECK(how == "wrong thread");
    Runtime rt(RuntimeConfig{.workers = 1});
    CHECK(rt.block_on(spend_permit(n)) == "permit");
}

}  // TEST_SUITE("sync/notify")
