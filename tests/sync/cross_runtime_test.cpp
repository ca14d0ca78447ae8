// tests/sync/cross_runtime_test.cpp: primitives shared by two runtimes, one of them ending
// while the other wakes its waiters (wait_queue.hpp, steps 4 and 6).
//
// Each round: runtime B's tasks wait on a primitive, runtime A's task signals it (sends,
// releases, notifies), and the main thread ends the runtimes while it does, B first in even
// rounds and A first in odd ones, by shutdown() or by destruction. ASan and TSan see a wake-up
// that touches a frame or a runtime already freed; the counts below see a value, a permit or a
// lock lost or handed out twice. State shared with tasks is declared before the runtimes, so
// it outlives them.
#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <optional>
#include <thread>
#include <vector>

#include <eddy/eddy.hpp>

#include "support/counted.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::test::Counted;
using eddy::test::LifetimeCounter;

namespace {

#ifdef EDDY_TEST_SANITIZED
constexpr int kRounds = 150;
#else
constexpr int kRounds = 400;
#endif
constexpr int kWaiters = 16;

/// How the runtimes of a round end: B (the waiters') first in even rounds, A first in odd
/// ones; each by shutdown() then destruction, or by destruction alone.
struct Round {
    int i;
    std::optional<Runtime> a, b;
    explicit Round(int round) : i(round) {
        a.emplace(RuntimeConfig{.workers = 1, .thread_name_prefix = "xsA"});
        b.emplace(RuntimeConfig{.workers = 1 + static_cast<std::size_t>(round % 3 == 2), .thread_name_prefix = "xsB"});
    }
    /// Waits until `waiting` tasks say they are about to wait (the last may not be queued yet:
    /// either way is a race worth having), then lets A signal and ends the runtimes while it does.
    template <class Signal>
    void race(const std::atomic<int>& waiting, int expected, Signal signal) {
        while (waiting.load() < expected) std::this_thread::yield();
        a->spawn(signal()).detach();
        for (int k = 0; k < i % 4; ++k) std::this_thread::yield();
        std::optional<Runtime>& first = i % 2 == 0 ? b : a;
        std::optional<Runtime>& second = i % 2 == 0 ? a : b;
        if ((i / 2) % 2 == 0) first->shutdown();
        first.reset();
        if ((i / 2) % 2 == 0) second->shutdown();
        second.reset();
    }
};

template <class Ch>
Task<void> receive_one(Ch& ch, std::atomic<int>& waiting, std::atomic<int>& got, Counted) {
    waiting.fetch_add(1);
    if (std::optional<int> v = co_await ch.receive()) got.fetch_add(1);
}

Task<void> acquire_one(eddy::Semaphore& s, std::atomic<int>& waiting, std::atomic<int>& acquired, Counted) {
    waiting.fetch_add(1);
    co_await s.acquire();
    acquired.fetch_add(1);  // kept: the task ends holding it
}

Task<void> lock_once(eddy::Mutex& m, std::atomic<int>& waiting, std::atomic<int>& locked, Counted) {
    waiting.fetch_add(1);
    eddy::MutexGuard g = co_await m.lock();
    locked.fetch_add(1);
}

Task<void> notified_once(eddy::Notify& n, std::atomic<int>& waiting, std::atomic<int>& woken, Counted) {
    waiting.fetch_add(1);
    co_await n.notified();
    woken.fetch_add(1);
}

Task<bool> await_notified(eddy::Notify& n) {
    co_await n.notified();
    co_return true;
}

/// Waits on each in turn.
Task<void> wait_on_all(eddy::Notify& n, eddy::Event& e, eddy::watch::Receiver<int> wrx,
                       eddy::broadcast::Receiver<int> brx, eddy::oneshot::Receiver<int> orx, std::atomic<int>& waiting,
                       std::atomic<int>& done, Counted) {
    waiting.fetch_add(1);
    co_await n.notified();
    co_await e;
    co_await wrx.changed();
    (void)co_await brx.receive();
    const int v = co_await orx;  // g++ 12: not inside the if (docs/guide/01-tasks.md)
    if (v == 5) done.fetch_add(1);
}

/// Drains `ch` after both runtimes are gone: every value must be there once, in the order it
/// was sent (those given back first, then the buffer).
template <class Ch>
int drain_in_order(Ch& ch) {
    int n = 0, last = -1;
    while (std::optional<int> v = ch.try_receive()) {
        CHECK(*v > last);
        last = *v;
        ++n;
    }
    return n;
}

}  // namespace

TEST_SUITE("sync") {

TEST_CASE("a Channel shared by two runtimes loses no value when either ends mid-wake") {
    LifetimeCounter frames;
    long sent_total = 0, got_total = 0, left_total = 0;
    for (int i = 0; i < kRounds; ++i) {
        eddy::Channel<int> ch(4);
        std::atomic<int> waiting{0}, got{0}, sent{0};
        {
            Round r(i);
            for (int w = 0; w < kWaiters; ++w) r.b->spawn(receive_one(ch, waiting, got, Counted(frames))).detach();
            r.race(waiting, kWaiters, [&]() -> Task<void> {
                for (int v = 0; v < kWaiters; ++v) {
                    co_await ch.send(int(v));
                    sent.fetch_add(1);
                }
            });
        }
        const int left = drain_in_order(ch);
        // A send that A's end cut short may have left its value in the channel uncounted.
        CHECK(got.load() + left >= sent.load());
        CHECK(got.load() + left <= sent.load() + 1);
        sent_total += sent.load();
        got_total += got.load();
        left_total += left;
    }
    CHECK(frames.alive() == 0);
    MESSAGE("sent " << sent_total << ", received " << got_total << ", left in the channel " << left_total);
}

TEST_CASE("an UnboundedChannel shared by two runtimes loses no value when either ends mid-wake") {
    LifetimeCounter frames;
    long given_back_rounds = 0;
    for (int i = 0; i < kRounds; ++i) {
        eddy::UnboundedChannel<int> ch;
        std::atomic<int> waiting{0}, got{0}, sent{0};
        {
            Round r(i);
            for (int w = 0; w < kWaiters; ++w) r.b->spawn(receive_one(ch, waiting, got, Counted(frames))).detach();
            r.race(waiting, kWaiters, [&]() -> Task<void> {
                for (int v = 0; v < kWaiters; ++v) {
                    ch.send(int(v));  // never suspends: counted once it returned
                    sent.fetch_add(1);
                    if (v % 4 == 3) co_await eddy::yield_now();
                }
            });
        }
        const int left = drain_in_order(ch);
        CHECK(got.load() + left >= sent.load());
        CHECK(got.load() + left <= sent.load() + 1);
        if (left > 0 && got.load() < sent.load()) ++given_back_rounds;
    }
    CHECK(frames.alive() == 0);
    MESSAGE(given_back_rounds << " rounds left values in the channel");
}

TEST_CASE("a Semaphore shared by two runtimes loses no permit when either ends mid-wake") {
    LifetimeCounter frames;
    for (int i = 0; i < kRounds; ++i) {
        eddy::Semaphore s(0);
        std::atomic<int> waiting{0}, acquired{0}, released{0};
        {
            Round r(i);
            for (int w = 0; w < kWaiters; ++w) {
                r.b->spawn(acquire_one(s, waiting, acquired, Counted(frames))).detach();
            }
            r.race(waiting, kWaiters, [&]() -> Task<void> {
                for (int k = 0; k < kWaiters; ++k) {
                    s.release();
                    released.fetch_add(1);
                    if (k % 4 == 3) co_await eddy::yield_now();
                }
            });
        }
        // Every permit released is held by a task that took it, or free again.
        CHECK(static_cast<int>(s.available()) + acquired.load() == released.load());
    }
    CHECK(frames.alive() == 0);
}

TEST_CASE("a Mutex shared by two runtimes is never left locked when either ends mid-wake") {
    LifetimeCounter frames;
    for (int i = 0; i < kRounds; ++i) {
        eddy::Mutex m;
        std::optional<eddy::MutexGuard> held = m.try_lock();
        REQUIRE(held);
        std::atomic<int> waiting{0}, locked{0};
        {
            Round r(i);
            for (int w = 0; w < kWaiters; ++w) {
                r.b->spawn(lock_once(m, waiting, locked, Counted(frames))).detach();
            }
            r.race(waiting, kWaiters, [&]() -> Task<void> {
                held.reset();  // hands the lock to B's first waiter, which hands it on
                co_return;
            });
        }
        held.reset();  // still ours when A ended before its task ran
        CHECK(m.waiters() == 0);
        CHECK_FALSE(m.is_locked());
        CHECK(locked.load() <= kWaiters);
    }
    CHECK(frames.alive() == 0);
}

TEST_CASE("a Notify shared by two runtimes passes on a notify_one its waiter never took") {
    LifetimeCounter frames;
    for (int i = 0; i < kRounds; ++i) {
        eddy::Notify n;
        std::atomic<int> waiting{0}, woken{0}, notified{0};
        {
            Round r(i);
            for (int w = 0; w < kWaiters; ++w) {
                r.b->spawn(notified_once(n, waiting, woken, Counted(frames))).detach();
            }
            r.race(waiting, kWaiters, [&]() -> Task<void> {
                for (int k = 0; k < kWaiters; ++k) {
                    n.notify_one();
                    notified.fetch_add(1);
                    if (k % 4 == 3) co_await eddy::yield_now();
                }
            });
        }
        CHECK(woken.load() <= notified.load());
        // A notification not taken is stored as the permit (at most one is kept).
        if (woken.load() < notified.load()) {
            Runtime c(RuntimeConfig{.workers = 1});
            CHECK(c.block_on(eddy::with_timeout(await_notified(n), std::chrono::seconds(20))));
        }
        CHECK(n.waiters() == 0);
    }
    CHECK(frames.alive() == 0);
}

TEST_CASE("notify_waiters, oneshot, watch and broadcast shared by two runtimes survive either ending") {
    LifetimeCounter frames;
    for (int i = 0; i < kRounds; ++i) {
        eddy::Notify n;
        eddy::Event e;
        auto watch_ends = eddy::watch::channel<int>(0);  // not bound by name: clang 14 cannot capture those
        auto broadcast_ends = eddy::broadcast::channel<int>(8);
        eddy::watch::Sender<int>& wtx = watch_ends.first;
        eddy::watch::Receiver<int>& wrx = watch_ends.second;
        eddy::broadcast::Sender<int>& btx = broadcast_ends.first;
        eddy::broadcast::Receiver<int>& brx = broadcast_ends.second;
        std::vector<eddy::oneshot::Sender<int>> once;
        std::vector<eddy::oneshot::Receiver<int>> once_rx;
        for (int w = 0; w < kWaiters; ++w) {
            auto [tx, rx] = eddy::oneshot::channel<int>();
            once.push_back(std::move(tx));
            once_rx.push_back(std::move(rx));
        }
        std::atomic<int> waiting{0}, done{0};
        {
            Round r(i);
            for (int w = 0; w < kWaiters; ++w) {
                r.b->spawn(
                       wait_on_all(n, e, wrx, brx.resubscribe(), std::move(once_rx[w]), waiting, done, Counted(frames)))
                    .detach();
            }
            r.race(waiting, kWaiters, [&]() -> Task<void> {
                n.notify_waiters();
                co_await eddy::yield_now();
                e.set();
                co_await eddy::yield_now();
                wtx.send(1);
                co_await eddy::yield_now();
                btx.send(2);
                for (auto& tx : once) {
                    co_await eddy::yield_now();
                    try {
                        tx.send(5);
                    } catch (const eddy::ChannelClosed&) {
                        // its receiver's frame is gone with B
                    }
                }
            });
        }
        CHECK(done.load() <= kWaiters);
        CHECK(n.waiters() == 0);
    }
    CHECK(frames.alive() == 0);
}

}  // TEST_SUITE("sync")
