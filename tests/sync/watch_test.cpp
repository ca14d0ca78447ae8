// tests/sync/watch_test.cpp: eddy::watch: versions and what each receiver has seen, every
// waiter woken by a send, send_modify/send_if_modified/send_replace, subscribe, the sender
// dropped (waiting and later changed()), cancellation without marking, races of stops and
// sends, whole values under concurrent sends, runtime shutdown while receivers wait, misuse.
//
// Tests that need "these tasks are waiting now" use one worker and eddy::test::settle(),
// where that is exact.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/sync/watch.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/counted.hpp"
#include "support/off_worker.hpp"
#include "support/sync_helpers.hpp"
#include "support/waiting.hpp"

using eddy::JoinHandle;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::test::outcome;
using eddy::test::settle;
using eddy::watch::Receiver;
using eddy::watch::Sender;

namespace {

/// Waits for a change and returns the value it marked seen.
Task<int> next_value(Receiver<int>& rx) {
    co_await rx.changed();
    co_return *rx.borrow();
}

Task<void> wait_changed(Receiver<int>& rx) { co_await rx.changed(); }

/// A value whose words are all equal: a torn read would show two different words.
struct Wide {
    std::array<std::uint64_t, 16> words{};
    explicit Wide(std::uint64_t v = 0) { words.fill(v); }
    bool whole() const {
        for (std::uint64_t w : words)
            if (w != words[0]) return false;
        return true;
    }
};

}  // namespace

TEST_SUITE("sync/watch") {

TEST_CASE("borrow reads the latest value; has_changed and borrow_and_update track what a receiver has seen") {
    auto [tx, rx] = eddy::watch::channel<std::string>("initial");
    CHECK(*rx.borrow() == "initial");
    CHECK_FALSE(rx.has_changed());  // the initial value counts as seen
    CHECK_FALSE(rx.borrow().has_changed());
    tx.send("one");
    CHECK(rx.has_changed());
    {
        auto ref = rx.borrow();  // does not mark it seen
        CHECK(ref.has_changed());
        CHECK(*ref == "one");
        CHECK(ref->size() == 3);
    }
    CHECK(rx.has_changed());
    {
        auto ref = rx.borrow_and_update();
        CHECK(ref.has_changed());
        CHECK(ref.get() == "one");
    }
    CHECK_FALSE(rx.has_changed());
    CHECK(*tx.borrow() == "one");
}

TEST_CASE("a send waits (blocking its thread) until the Ref being read is released") {
    auto [tx, rx] = eddy::watch::channel<int>(1);
    std::atomic<bool> sent{false};
    std::thread sender;
    {
        auto ref = rx.borrow();
        sender = std::thread([&s = tx, &sent] {
            s.send(2);
            sent.store(true);
        });
        // However long this takes, a send must not get past a held Ref (a correct channel
        // can never fail this; a broken one fails it most of the time).
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        CHECK_FALSE(sent.load());
        CHECK(*ref == 1);  // the value under a Ref does not change
    }
    sender.join();
    CHECK(sent.load());
    CHECK(*rx.borrow() == 2);
}

TEST_CASE("copies of a receiver track their own seen version; subscribe starts at the current value") {
    auto [tx, rx] = eddy::watch::channel<int>(0);
    tx.send(1);
    Receiver<int> copy = rx;  // has seen what rx had seen: version 0
    CHECK(copy.has_changed());
    (void)rx.borrow_and_update();
    CHECK_FALSE(rx.has_changed());
    CHECK(copy.has_changed());  // rx's update is not copy's
    Receiver<int> late = tx.subscribe();
    CHECK_FALSE(late.has_changed());
    CHECK(*late.borrow() == 1);
    CHECK(tx.receiver_count() == 3);
    Receiver<int> assigned = late;
    assigned = copy;  // copy-assignment takes copy's seen version
    CHECK(assigned.has_changed());
    CHECK(tx.receiver_count() == 4);
}

TEST_CASE("changed returns at once for a newer value and marks it seen; skipped values are not reported") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto [tx, rx] = eddy::watch::channel<int>(0);
    const std::vector<int> got =
        rt.block_on([](Sender<int>& publisher, Receiver<int>& subscriber) -> Task<std::vector<int>> {
            publisher.send(1);
            publisher.send(2);
            publisher.send(3);
            std::vector<int> received;
            received.push_back(co_await next_value(subscriber));  // only the latest: 1 and 2 are skipped
            received.push_back(subscriber.has_changed() ? 1 : 0);
            JoinHandle<int> waiting = eddy::spawn(next_value(subscriber));
            co_await settle();
            received.push_back(waiting.is_finished() ? 1 : 0);  // nothing newer: it waits
            publisher.send(4);
            received.push_back(co_await std::move(waiting));
            co_return received;
        }(tx, rx));
    CHECK(got == std::vector<int>{3, 0, 0, 4});
}

TEST_CASE("a send wakes every waiting receiver, from a task or from a plain thread") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto [tx, rx] = eddy::watch::channel<int>(0);
    constexpr int kWaiters = 20;
    std::atomic<int> started{0};
    std::vector<JoinHandle<int>> waiting;
    for (int i = 0; i < kWaiters; ++i) {
        waiting.push_back(rt.spawn([](Receiver<int> subscriber, std::atomic<int>& starts) -> Task<int> {
            starts.fetch_add(1);
            co_return co_await next_value(subscriber);
        }(rx, started)));
    }
    const auto deadline = std::chrono::steady_clock::now() + eddy::test::kDeadline;
    while (started.load() < kWaiters && !eddy::test::past(deadline)) std::this_thread::yield();
    std::thread sender([&s = tx] { s.send(7); });  // most receivers wait by now
    sender.join();
    int sum = 0;
    for (auto& h : waiting)
        sum += rt.block_on(
            [](JoinHandle<int> handle) -> Task<int> { co_return co_await std::move(handle); }(std::move(h)));
    CHECK(sum == 7 * kWaiters);
}

TEST_CASE(
    "send_modify changes the value in place; send_if_modified notifies only when told; send_replace returns the old "
    "value") {
    auto [tx, rx] = eddy::watch::channel<std::vector<int>>({1});
    tx.send_modify([](std::vector<int>& v) { v.push_back(2); });
    CHECK(rx.has_changed());
    CHECK(*rx.borrow_and_update() == std::vector<int>{1, 2});
    CHECK_FALSE(tx.send_if_modified([](std::vector<int>& v) {
        v.push_back(3);  // changed, but not announced
        return false;
    }));
    CHECK_FALSE(rx.has_changed());
    CHECK(rx.borrow()->size() == 3);
    CHECK(tx.send_if_modified([](std::vector<int>& v) {
        v.clear();
        return true;
    }));
    CHECK(rx.has_changed());
    const std::vector<int> old = tx.send_replace({9});
    CHECK(old.empty());
    CHECK(*rx.borrow_and_update() == std::vector<int>{9});
    // A modification that throws is announced anyway (it may have changed the value partly).
    CHECK_THROWS_AS(tx.send_modify([](std::vector<int>& v) {
        v.push_back(10);
        throw std::runtime_error("half done");
    }),
                    std::runtime_error);
    CHECK(rx.has_changed());
    CHECK(*rx.borrow() == std::vector<int>{9, 10});
}

TEST_CASE("a dropped sender wakes waiting receivers with ChannelClosed; a newer value is reported once first") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto [tx, rx] = eddy::watch::channel<int>(0);
    struct Result {
        std::string waiting;
        int newer = 0;
        std::string after;
        int last = 0;
    };
    const Result r = rt.block_on([](Sender<int> publisher, Receiver<int>& subscriber) -> Task<Result> {
        Receiver<int> behind = subscriber;
        Result result;
        JoinHandle<void> waiting = eddy::spawn(wait_changed(subscriber));
        co_await settle();
        publisher.send(5);  // `waiting` is granted this one...
        co_await settle();
        JoinHandle<void> again = eddy::spawn(wait_changed(subscriber));
        co_await settle();
        { Sender<int> dropped = std::move(publisher); }  // ...and `again` the close
        co_await std::move(waiting);
        result.waiting = co_await outcome(std::move(again));
        result.newer = co_await next_value(behind);  // had not seen 5: reported, then the close
        result.after = co_await outcome(eddy::spawn(wait_changed(behind)));
        result.last = *behind.borrow();  // the last value stays readable
        co_return result;
    }(std::move(tx), rx));
    CHECK(r.waiting == "closed");
    CHECK(r.newer == 5);
    CHECK(r.after == "closed");
    CHECK(r.last == 5);
}

TEST_CASE("the sender sees its receivers go; values are destroyed with the last end, whichever it is") {
    eddy::test::LifetimeCounter counter;
    {
        auto [tx, rx] = eddy::watch::channel<eddy::test::Counted>(eddy::test::Counted(counter, 1));
        CHECK_FALSE(tx.is_closed());
        { Receiver<eddy::test::Counted> dropped = std::move(rx); }
        CHECK(tx.is_closed());
        CHECK(tx.receiver_count() == 0);
        tx.send(eddy::test::Counted(counter, 2));  // stored even so
        Receiver<eddy::test::Counted> late = tx.subscribe();
        CHECK(late.borrow()->value() == 2);
        CHECK_FALSE(tx.is_closed());
        { Sender<eddy::test::Counted> dropped = std::move(tx); }
        CHECK(counter.alive() == 1);  // the receiver still holds the state
    }
    CHECK(counter.alive() == 0);
}

TEST_CASE("a cancelled changed marks nothing seen: the next changed reports the value") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto [tx, rx] = eddy::watch::channel<int>(0);
    struct Result {
        std::string cancelled;
        bool changed_before = true;
        bool changed_after = false;
        int next = 0;
    };
    tx.send(1);
    (void)rx.borrow_and_update();  // seen: version 1
    const Result r = rt.block_on([](Sender<int>& publisher, Receiver<int>& subscriber) -> Task<Result> {
        std::stop_source stop;
        JoinHandle<int> waiting = eddy::spawn(eddy::with_stop_token(next_value(subscriber), stop.get_token()));
        co_await settle();
        stop.request_stop();
        Result result;
        result.cancelled = co_await outcome(std::move(waiting));
        result.changed_before = subscriber.has_changed();  // still at version 1
        publisher.send(3);
        result.changed_after = subscriber.has_changed();
        result.next = co_await next_value(subscriber);
        co_return result;
    }(tx, rx));
    CHECK(r.cancelled == "cancelled");
    CHECK_FALSE(r.changed_before);
    CHECK(r.changed_after);
    CHECK(r.next == 3);
    CHECK_FALSE(rx.has_changed());
}

TEST_CASE("changed under a stopped token throws at once, even with a newer value, and marks nothing") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto [tx, rx] = eddy::watch::channel<int>(0);
    tx.send(1);
    std::stop_source stop;
    stop.request_stop();
    const std::string how = rt.block_on([](Receiver<int>& subscriber, std::stop_token t) -> Task<std::string> {
        co_return co_await outcome(eddy::spawn(eddy::with_stop_token(wait_changed(subscriber), t)));
    }(rx, stop.get_token()));
    CHECK(how == "cancelled");
    CHECK(rx.has_changed());
}

TEST_CASE("a changed whose stop races a send on two workers either reports the value or leaves it unseen") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto [tx, rx] = eddy::watch::channel<int>(0);
    constexpr int kRounds = 300;
    const int wrong = rt.block_on([](Sender<int>& publisher, Receiver<int>& subscriber) -> Task<int> {
        int mismatches = 0;
        for (int i = 1; i <= kRounds; ++i) {
            std::stop_source stop;
            JoinHandle<int> waiter = eddy::spawn(eddy::with_stop_token(next_value(subscriber), stop.get_token()));
            JoinHandle<void> sender = eddy::spawn([](Sender<int>& snd, int v) -> Task<void> {
                snd.send(v);
                co_return;
            }(publisher, i));
            stop.request_stop();
            co_await std::move(sender);
            try {
                if (co_await std::move(waiter) != i) ++mismatches;
                if (subscriber.has_changed()) ++mismatches;  // reported: marked seen
            } catch (const eddy::OperationCancelled&) {
                if (!subscriber.has_changed()) ++mismatches;  // cancelled: still unseen
                if (*subscriber.borrow_and_update() != i) ++mismatches;
            }
        }
        co_return mismatches;
    }(tx, rx));
    CHECK(wrong == 0);
}

TEST_CASE("readers on four workers never see a torn value and end on the last one") {
    Runtime rt(RuntimeConfig{.workers = 4});
    auto [tx, rx] = eddy::watch::channel<Wide>(Wide(0));
    constexpr std::uint64_t kSends = 3000;
    constexpr int kReaders = 6;
    struct Seen {
        std::uint64_t last = 0;
        int torn = 0;
        int backwards = 0;
    };
    auto reader = [](Receiver<Wide> subscriber) -> Task<Seen> {
        Seen s;
        for (;;) {
            try {
                co_await subscriber.changed();
            } catch (const eddy::ChannelClosed&) {
                break;
            }
            auto ref = subscriber.borrow();  // released before the next co_await
            if (!ref->whole()) ++s.torn;
            if (ref->words[0] < s.last) ++s.backwards;
            s.last = ref->words[0];
        }
        co_return s;
    };
    std::vector<JoinHandle<Seen>> readers;
    for (int i = 0; i < kReaders; ++i) readers.push_back(rt.spawn(reader(rx)));
    // A plain thread borrows too, without a runtime.
    std::atomic<bool> done{false};
    std::atomic<int> thread_torn{0};
    std::thread peeker([&peek = rx, &done, &thread_torn] {
        while (!done.load()) {
            if (!peek.borrow()->whole()) thread_torn.fetch_add(1);
        }
    });
    rt.block_on([](Sender<Wide> publisher) -> Task<void> {
        for (std::uint64_t i = 1; i <= kSends; ++i) {
            if (i % 2 == 0) {
                publisher.send(Wide(i));
            } else {
                publisher.send_modify([i](Wide& w) { w.words.fill(i); });
            }
            if (i % 64 == 0) co_await eddy::yield_now();
        }
    }(std::move(tx)));  // the sender is dropped at the end: the readers finish
    done.store(true);
    peeker.join();
    for (auto& h : readers) {
        const Seen s = rt.block_on(
            [](JoinHandle<Seen> handle) -> Task<Seen> { co_return co_await std::move(handle); }(std::move(h)));
        CHECK(s.torn == 0);
        CHECK(s.backwards == 0);
        CHECK(s.last == kSends);  // the last value is always reported
    }
    CHECK(thread_torn.load() == 0);
}

TEST_CASE("a runtime destroyed while receivers wait in changed unlinks them; the channel works on") {
    eddy::test::LifetimeCounter frames;
    auto [tx, rx] = eddy::watch::channel<int>(0);
    {
        Runtime rt(RuntimeConfig{.workers = 2});
        std::atomic<int> waiting{0};
        for (int i = 0; i < 10; ++i) {
            (void)rt.spawn([](Receiver<int> subscriber, std::atomic<int>& waiters, eddy::test::Counted) -> Task<void> {
                waiters.fetch_add(1);
                co_await subscriber.changed();
            }(rx, waiting, eddy::test::Counted(frames)));
        }
        const auto deadline = std::chrono::steady_clock::now() + eddy::test::kDeadline;
        while (waiting.load() < 10 && !eddy::test::past(deadline)) std::this_thread::yield();
        CHECK(tx.receiver_count() == 11);
    }
    CHECK(frames.alive() == 0);
    CHECK(tx.receiver_count() == 1);  // the frames' receivers are gone
    tx.send(1);                       // touches no destroyed waiter (ASan)
    CHECK(*rx.borrow() == 1);
}

TEST_CASE("misuse: changed off a worker throws WrongThread; a moved-from end throws ChannelClosed") {
    auto [tx, rx] = eddy::watch::channel<int>(0);
    tx.send(1);
    std::string how;
    Receiver<int>& r = rx;  // a lambda cannot capture a structured binding (clang 14)
    eddy::test::await_off_worker([&r] { return r.changed(); }, how);
    CHECK(how == "wrong thread");
    CHECK(rx.has_changed());  // nothing marked

    Receiver<int> moved = std::move(rx);
    CHECK_THROWS_AS((void)rx.borrow(), eddy::ChannelClosed);
    CHECK_THROWS_AS((void)rx.has_changed(), eddy::ChannelClosed);
    CHECK_THROWS_AS((void)rx.changed(), eddy::ChannelClosed);
    Receiver<int> copy_of_empty = rx;  // copying an empty receiver gives an empty receiver
    CHECK_THROWS_AS((void)copy_of_empty.borrow_and_update(), eddy::ChannelClosed);
    Sender<int> moved_tx = std::move(tx);
    CHECK_THROWS_AS(tx.send(2), eddy::ChannelClosed);
    CHECK_THROWS_AS((void)tx.borrow(), eddy::ChannelClosed);
    CHECK_THROWS_AS((void)tx.subscribe(), eddy::ChannelClosed);
    CHECK_THROWS_AS((void)tx.receiver_count(), eddy::ChannelClosed);
    CHECK(*moved.borrow() == 1);
    moved_tx.send(3);
    CHECK(*moved.borrow() == 3);
}

}  // TEST_SUITE("sync/watch")
