// tests/stress/sync_shutdown_stress_test.cpp: runtimes destroyed while tasks wait on the
// synchronization primitives and channels, some of them just granted what they waited for.
//
// The primitives outlive the runtime: their queues must not point into destroyed frames
// (ASan would see the sends, releases and closes after the runtime touch freed memory), and a
// lock, permit or notification handed to a frame that shutdown destroyed must not be lost.
// tests/stress/sync_stress.hpp gives the worker counts and rounds.

#include <eddy/eddy.hpp>

#include "stress/sync_stress.hpp"
#include "support/counted.hpp"
#include "support/notify_probe.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <thread>

using eddy::JoinHandle;
using eddy::Task;
using eddy::test::sync_stress::for_each_configuration;

namespace {

constexpr const char* kProgram = "sync_shutdown_stress";

// Waiters, each on one primitive; their Counted lives in the frame, so `alive() == 0` after
// the runtime proves that shutdown destroyed every one of them.
Task<void> wait_event(eddy::Event& e, eddy::test::Counted) { co_await e; }
Task<void> lock_mutex(eddy::Mutex& m, eddy::test::Counted) { eddy::MutexGuard g = co_await m.lock(); }
Task<void> acquire_permit(eddy::Semaphore& s, eddy::test::Counted) { co_await s.acquire(); }
Task<void> send_value(eddy::Channel<int>& ch, eddy::test::Counted) { co_await ch.send(1); }
Task<void> receive_value(eddy::Channel<int>& ch, eddy::test::Counted) { (void)co_await ch.receive(); }
Task<void> read_lock(eddy::RwLock& l, eddy::test::Counted) { eddy::RwLock::ReadGuard g = co_await l.read(); }
Task<void> write_lock(eddy::RwLock& l, eddy::test::Counted) { eddy::RwLock::WriteGuard g = co_await l.write(); }
Task<void> wait_notify(eddy::Notify& n, std::atomic<int>& ok, eddy::test::Counted) {
    co_await n.notified();
    ok.fetch_add(1);
}
Task<void> arrive_barrier(eddy::Barrier& b, eddy::test::Counted) { (void)co_await b.arrive_and_wait(); }
Task<void> wait_watch(eddy::watch::Receiver<int> rx, std::atomic<int>& waiting, eddy::test::Counted) {
    waiting.fetch_add(1);
    co_await rx.changed();
}
Task<void> wait_broadcast(eddy::broadcast::Receiver<int> rx, std::atomic<int>& waiting, eddy::test::Counted) {
    waiting.fetch_add(1);
    (void)co_await rx.receive();
}
Task<void> receive_counted(eddy::Channel<int>& ch, std::atomic<int>& waiting, std::atomic<int>& got,
                           eddy::test::Counted) {
    waiting.fetch_add(1);
    if (std::optional<int> v = co_await ch.receive()) got.fetch_add(1);  // g++ 12: not `if (co_await ...)`
}
Task<void> acquire_counted(eddy::Semaphore& s, std::atomic<int>& waiting, std::atomic<int>& acquired,
                           eddy::test::Counted) {
    waiting.fetch_add(1);
    co_await s.acquire();
    acquired.fetch_add(1);  // kept
}
Task<void> send_and_release(eddy::Channel<int>& ch, eddy::Semaphore& s, int n, std::atomic<int>& sent,
                            std::atomic<int>& released) {
    for (int v = 0; v < n; ++v) {
        co_await ch.send(int(v));
        sent.fetch_add(1);
        s.release();
        released.fetch_add(1);
    }
}
Task<void> wait_unbounded(eddy::UnboundedChannel<int>& ch, std::atomic<int>& waiting, eddy::test::Counted) {
    waiting.fetch_add(1);
    (void)co_await ch.receive();
}

}  // namespace

TEST_SUITE("stress/sync") {

TEST_CASE("a runtime destroyed while tasks wait on primitives unlinks every waiter") {
    // The primitives outlive the runtime: their queues must not point into destroyed frames
    // (ASan would see the set/release/close below touch freed memory).
    for_each_configuration(kProgram, [](std::size_t workers) {
        eddy::test::LifetimeCounter frames;
        eddy::Event e;
        eddy::Mutex m;
        eddy::Semaphore s(0);
        eddy::Channel<int> full(1), empty(1);
        REQUIRE(full.try_send(0));
        std::optional<eddy::MutexGuard> held = m.try_lock();
        {
            eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
            for (int i = 0; i < 10; ++i) {
                (void)rt.spawn(wait_event(e, eddy::test::Counted(frames)));
                (void)rt.spawn(lock_mutex(m, eddy::test::Counted(frames)));
                (void)rt.spawn(acquire_permit(s, eddy::test::Counted(frames)));
                (void)rt.spawn(send_value(full, eddy::test::Counted(frames)));
                (void)rt.spawn(receive_value(empty, eddy::test::Counted(frames)));
            }
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
            while (m.waiters() < 10 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
            CHECK(m.waiters() == 10);
        }
        CHECK(frames.alive() == 0);
        CHECK(m.waiters() == 0);
        e.set();
        held.reset();
        CHECK_FALSE(m.is_locked());
        s.release(5);
        CHECK(s.available() == 5);
        full.close();
        empty.close();
        CHECK(full.try_receive() == 0);
    });
}

TEST_CASE("a mutex or permit handed to a task that shutdown destroyed before it resumed is not lost") {
    // Releasing from this thread grants the first waiter and queues it; the runtime is then
    // destroyed at once, so some rounds destroy the granted frame before it ever ran. Its
    // awaiter must pass the ownership (or the permit) on instead of taking it with it.
    for_each_configuration(kProgram, [](std::size_t workers) {
        for (int i = 0; i < 20; ++i) {
            eddy::Mutex m;
            eddy::Semaphore s(0);
            std::optional<eddy::MutexGuard> held = m.try_lock();
            {
                eddy::test::LifetimeCounter frames;  // outlives the frames the runtime destroys
                eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
                for (int k = 0; k < 4; ++k) {
                    (void)rt.spawn(lock_mutex(m, eddy::test::Counted(frames)));
                    (void)rt.spawn([](eddy::Semaphore& sem) -> Task<void> {
                        co_await sem.acquire();
                        sem.release();
                    }(s));
                }
                const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
                while (m.waiters() < 4 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
                REQUIRE(m.waiters() == 4);
                held.reset();
                s.release();
            }
            CHECK_FALSE(m.is_locked());
            CHECK(m.waiters() == 0);
            CHECK(s.available() == 1);
        }
    });
}

TEST_CASE("a runtime destroyed while tasks wait on an rwlock, a notify or a barrier unlinks every waiter") {
    for_each_configuration(kProgram, [](std::size_t workers) {
        eddy::test::LifetimeCounter frames;
        eddy::RwLock l, handed;
        eddy::Notify n;
        eddy::Barrier b(11);
        std::atomic<int> woken{0};
        std::optional<eddy::RwLock::WriteGuard> held = l.try_write();
        std::optional<eddy::RwLock::WriteGuard> to_hand = handed.try_write();
        {
            eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
            for (int i = 0; i < 10; ++i) {
                (void)rt.spawn(read_lock(l, eddy::test::Counted(frames)));
                (void)rt.spawn(write_lock(l, eddy::test::Counted(frames)));
                (void)rt.spawn((i % 2 == 0 ? read_lock : write_lock)(handed, eddy::test::Counted(frames)));
                (void)rt.spawn(wait_notify(n, woken, eddy::test::Counted(frames)));
                (void)rt.spawn(arrive_barrier(b, eddy::test::Counted(frames)));
            }
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
            while ((l.waiters() < 20 || handed.waiters() < 10 || n.waiters() < 10 || b.waiting() < 10) &&
                   std::chrono::steady_clock::now() < deadline)
                std::this_thread::yield();
            REQUIRE(l.waiters() == 20);
            REQUIRE(handed.waiters() == 10);
            REQUIRE(n.waiters() == 10);
            REQUIRE(b.waiting() == 10);
            // Handed over at once before the runtime goes: some granted frames never run.
            to_hand.reset();
            n.notify_one();
        }
        CHECK(frames.alive() == 0);
        CHECK(l.waiters() == 0);
        CHECK(n.waiters() == 0);
        CHECK(b.waiting() == 0);
        CHECK(b.generation() == 0);
        CHECK(handed.waiters() == 0);
        CHECK_FALSE(handed.is_write_locked());
        CHECK(handed.readers() == 0);
        held.reset();
        CHECK_FALSE(l.is_write_locked());
        // The notification went to a waiter that ran, or ends stored as the permit.
        eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
        const std::string permit = rt.block_on(eddy::test::spend_permit(n));
        CHECK(woken.load() + (permit == "permit" ? 1 : 0) == 1);
    });
}

TEST_CASE("a runtime destroyed while tasks wait on watch, broadcast and unbounded channels unlinks every waiter") {
    // The channels outlive the runtime: their queues must not point into destroyed frames
    // (ASan would see the sends below touch freed memory).
    for_each_configuration(kProgram, [](std::size_t workers) {
        eddy::test::LifetimeCounter frames;
        auto [wtx, wrx] = eddy::watch::channel<int>(0);
        auto [btx, brx] = eddy::broadcast::channel<int>(4);
        eddy::UnboundedChannel<int> u;
        {
            eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
            std::atomic<int> waiting{0};
            for (int i = 0; i < 10; ++i) {
                (void)rt.spawn(wait_watch(wrx, waiting, eddy::test::Counted(frames)));
                (void)rt.spawn(wait_broadcast(btx.subscribe(), waiting, eddy::test::Counted(frames)));
                (void)rt.spawn(wait_unbounded(u, waiting, eddy::test::Counted(frames)));
            }
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
            while (waiting.load() < 30 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
            CHECK(waiting.load() == 30);
        }
        CHECK(frames.alive() == 0);
        CHECK(wtx.receiver_count() == 1);
        CHECK(btx.receiver_count() == 1);
        wtx.send(1);
        CHECK(btx.send(1) == 1);
        u.send(1);
        CHECK(u.size() == 1);
        CHECK(*wrx.borrow() == 1);
        CHECK(brx.try_receive() == 1);
        u.close();
        CHECK(u.try_receive() == 1);
    });
}

TEST_CASE("a runtime destroyed while another runtime's task grants its waiters loses no value or permit") {
    // Runtime B (the worker count under test) waits on a channel and a semaphore that a task of
    // runtime A feeds; B is destroyed while A's grants are in flight (wait_queue.hpp, steps 4
    // and 6). Every value is received or still in the channel, in order; every permit is held
    // by a task that took it or free again.
    for_each_configuration(kProgram, [](std::size_t workers) {
        constexpr int kWaiters = 32;
        eddy::test::LifetimeCounter frames;
        eddy::Channel<int> ch(kWaiters);  // room for every value: A's sends never wait for B
        eddy::Semaphore s(0);
        std::atomic<int> waiting{0}, got{0}, acquired{0}, sent{0}, released{0};
        {
            eddy::Runtime a(eddy::RuntimeConfig{.workers = 1});
            {
                eddy::Runtime b(eddy::RuntimeConfig{.workers = workers});
                for (int i = 0; i < kWaiters; ++i) {
                    b.spawn(receive_counted(ch, waiting, got, eddy::test::Counted(frames))).detach();
                    b.spawn(acquire_counted(s, waiting, acquired, eddy::test::Counted(frames))).detach();
                }
                while (waiting.load() < 2 * kWaiters) std::this_thread::yield();
                a.spawn(send_and_release(ch, s, kWaiters, sent, released)).detach();
                while (sent.load() < kWaiters / 4) std::this_thread::yield();
            }                                                 // B ends while A sends
            a.shutdown_gracefully(std::chrono::seconds(60));  // A's task ends: no waiter is left
        }
        CHECK(frames.alive() == 0);
        CHECK(sent.load() == kWaiters);
        int left = 0, last = -1;
        while (std::optional<int> v = ch.try_receive()) {
            CHECK(*v > last);
            last = *v;
            ++left;
        }
        CHECK(got.load() + left == kWaiters);
        CHECK(static_cast<int>(s.available()) + acquired.load() == released.load());
    });
}

}  // TEST_SUITE("stress/sync")
