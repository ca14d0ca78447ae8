// tests/runtime/awaiter_move_test.cpp: every operation the runtime and the task layer hand
// out moves until it is first awaited (a combinator that owns its operation moves it into
// itself), and the moved operation still works: it waits on the same primitive, takes the
// same value, holds the same lock. A moved operation dropped unawaited, with its source,
// leaves the primitive as it was. The I/O operations are in tests/reactor/ and tests/net/.
#include <doctest/doctest.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <type_traits>
#include <utility>

#include <eddy/sync/barrier.hpp>
#include <eddy/sync/broadcast.hpp>
#include <eddy/sync/channel.hpp>
#include <eddy/runtime/coop.hpp>
#include <eddy/sync/event.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/join_set.hpp>
#include <eddy/sync/latch.hpp>
#include <eddy/sync/mutex.hpp>
#include <eddy/sync/notify.hpp>
#include <eddy/sync/oneshot.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/sync/rw_lock.hpp>
#include <eddy/sync/semaphore.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/spawn_blocking.hpp>
#include <eddy/runtime/task_dump.hpp>
#include <eddy/runtime/time.hpp>
#include <eddy/sync/unbounded_channel.hpp>
#include <eddy/sync/watch.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/task.hpp>
#include <eddy/tasks/task_local.hpp>

#include "support/counted.hpp"
#include "support/net_helpers.hpp"
#include "support/move_ops.hpp"

using eddy::Task;
using eddy::test::kMovable;
using eddy::test::ref;
using eddy::test::relocate;
using eddy::test::run_alone;

namespace {

// What each public call returns, as the caller gets it. An awaitable with operator co_await
// (Event, oneshot::Receiver, JoinHandle) must move itself; the awaiter it makes is checked too.
static_assert(kMovable<decltype(ref<eddy::Event>().operator co_await())>);
static_assert(kMovable<decltype(ref<eddy::Latch>().wait())>);
static_assert(kMovable<decltype(ref<eddy::Latch>().arrive_and_wait())>);
static_assert(kMovable<decltype(ref<eddy::Mutex>().lock())>);
static_assert(kMovable<decltype(ref<eddy::RwLock>().read())>);
static_assert(kMovable<decltype(ref<eddy::RwLock>().write())>);
static_assert(kMovable<decltype(ref<eddy::Semaphore>().acquire())>);
static_assert(kMovable<decltype(ref<eddy::Notify>().notified())>);
static_assert(kMovable<decltype(ref<eddy::Barrier>().arrive_and_wait())>);
static_assert(kMovable<decltype(ref<eddy::Channel<int>>().send(1))>);
static_assert(kMovable<decltype(ref<eddy::Channel<std::unique_ptr<int>>>().send(nullptr))>);
static_assert(kMovable<decltype(ref<eddy::Channel<int>>().receive())>);
static_assert(kMovable<decltype(ref<eddy::UnboundedChannel<int>>().receive())>);
static_assert(kMovable<eddy::oneshot::Receiver<int>>);
static_assert(kMovable<decltype(ref<eddy::oneshot::Receiver<int>>().operator co_await())>);
static_assert(kMovable<decltype(ref<eddy::broadcast::Receiver<int>>().receive())>);
static_assert(kMovable<decltype(ref<eddy::watch::Receiver<int>>().changed())>);
static_assert(kMovable<decltype(ref<eddy::JoinSet<int>>().join_next())>);
static_assert(kMovable<eddy::JoinHandle<int>>);
static_assert(kMovable<decltype(eddy::spawn_blocking([] { return 1; }))>);
static_assert(kMovable<decltype(eddy::yield_now())>);
static_assert(kMovable<decltype(eddy::coop::consume_budget())>);
static_assert(kMovable<decltype(eddy::coop::remaining_budget())>);
static_assert(kMovable<decltype(eddy::time::advance(std::chrono::seconds(1)))>);
static_assert(kMovable<decltype(eddy::dump_tasks())>);
static_assert(kMovable<decltype(eddy::this_task::stop_token())>);
static_assert(kMovable<decltype(eddy::this_task::check_cancelled())>);
static_assert(kMovable<decltype(ref<const eddy::task_local<int>>().get())>);
static_assert(kMovable<decltype(ref<const eddy::task_local<int>>().try_get())>);
// Moved into place once, never assigned over.
static_assert(!std::is_move_assignable_v<decltype(ref<eddy::Mutex>().lock())>);
static_assert(!std::is_move_assignable_v<decltype(ref<eddy::Channel<int>>().receive())>);

Task<void> send_later(eddy::Channel<std::string>& ch, std::string v) {
    co_await eddy::yield_now();
    co_await ch.send(std::move(v));
}

Task<void> unlock_later(eddy::MutexGuard g) {
    co_await eddy::yield_now();
    g.unlock();
}

Task<void> release_later(eddy::Semaphore& s, std::size_t n) {
    co_await eddy::yield_now();
    s.release(n);
}

Task<void> set_later(eddy::Event& e) {
    co_await eddy::yield_now();
    e.set();
}

}  // namespace

TEST_SUITE("runtime/awaiter_move") {

TEST_CASE("a moved Channel::receive waits on the channel and gets the value sent") {
    eddy::Channel<std::string> ch(1);
    const std::optional<std::string> got =
        run_alone([](eddy::Channel<std::string>& chan) -> Task<std::optional<std::string>> {
            auto op = relocate([&] { return chan.receive(); });
            eddy::spawn(send_later(chan, "moved"));
            co_return co_await op;
        }(ch));
    CHECK(got == std::optional<std::string>("moved"));
}

TEST_CASE("a moved Channel::send carries its value") {
    eddy::Channel<std::unique_ptr<int>> ch(1);
    const int got = run_alone([](eddy::Channel<std::unique_ptr<int>>& chan) -> Task<int> {
        auto op = relocate([&] { return chan.send(std::make_unique<int>(42)); });
        co_await op;
        co_return **co_await chan.receive();
    }(ch));
    CHECK(got == 42);
}

TEST_CASE("a moved Mutex::lock waits for the holder and then holds the lock") {
    eddy::Mutex m;
    const bool owned = run_alone([](eddy::Mutex& mutex) -> Task<bool> {
        eddy::MutexGuard held = co_await mutex.lock();
        auto op = relocate([&] { return mutex.lock(); });
        eddy::spawn(unlock_later(std::move(held)));
        eddy::MutexGuard g = co_await op;  // handed over by unlock_later
        const bool ok = g.owns_lock() && mutex.is_locked() && !mutex.try_lock();
        co_return ok;
    }(m));
    CHECK(owned);
    CHECK_FALSE(m.is_locked());
    CHECK(m.waiters() == 0);
}

TEST_CASE("a moved Semaphore::acquire takes its permits once they are released") {
    eddy::Semaphore s(0);
    run_alone([](eddy::Semaphore& sem) -> Task<void> {
        auto op = relocate([&] { return sem.acquire(3); });
        eddy::spawn(release_later(sem, 4));
        co_await op;
    }(s));
    CHECK(s.available() == 1);
}

TEST_CASE("a moved Event wait returns once the event is set") {
    eddy::Event e;
    const bool set = run_alone([](eddy::Event& event) -> Task<bool> {
        auto op = relocate([&] { return event.operator co_await(); });
        eddy::spawn(set_later(event));
        co_await op;
        co_return event.is_set();
    }(e));
    CHECK(set);
}

TEST_CASE("moved Notify, RwLock, Latch, oneshot and watch operations complete") {
    eddy::Notify n;
    eddy::RwLock l;
    eddy::Latch latch(1);
    auto [tx, rx] = eddy::oneshot::channel<int>();
    auto [wtx, wrx] = eddy::watch::channel<int>(0);
    run_alone([](eddy::Notify& notify, eddy::RwLock& lock, eddy::Latch& gate, eddy::oneshot::Sender<int>& once_tx,
                 eddy::oneshot::Receiver<int>& once_rx, eddy::watch::Sender<int>& watch_tx,
                 eddy::watch::Receiver<int>& watch_rx) -> Task<void> {
        notify.notify_one();  // the stored permit
        auto notified = relocate([&] { return notify.notified(); });
        co_await notified;
        auto write = relocate([&] { return lock.write(); });
        auto guard = co_await write;
        CHECK(guard.owns_lock());
        auto wait = relocate([&] { return gate.arrive_and_wait(); });
        co_await wait;
        once_tx.send(7);
        auto value = relocate([&] { return std::move(once_rx).operator co_await(); });
        CHECK(co_await value == 7);
        watch_tx.send(5);
        auto changed = relocate([&] { return watch_rx.changed(); });
        co_await changed;
        CHECK(*watch_rx.borrow() == 5);
    }(n, l, latch, tx, rx, wtx, wrx));
}

TEST_CASE("an operation moved and then dropped with its source leaves the primitive as it was") {
    eddy::test::LifetimeCounter counter;
    eddy::Mutex m;
    eddy::Semaphore s(2);
    eddy::Event e;
    eddy::Notify n;
    eddy::Channel<eddy::test::Counted> ch(1);
    run_alone([](eddy::Mutex& mutex, eddy::Semaphore& sem, eddy::Event& event, eddy::Notify& notify,
                 eddy::Channel<eddy::test::Counted>& chan, eddy::test::LifetimeCounter& lifetimes) -> Task<void> {
        (void)relocate([&] { return mutex.lock(); });
        (void)relocate([&] { return sem.acquire(2); });
        (void)relocate([&] { return event.operator co_await(); });
        (void)relocate([&] { return notify.notified(); });
        (void)relocate([&] { return chan.send(eddy::test::Counted(lifetimes, 1)); });
        (void)relocate([&] { return chan.receive(); });
        co_return;
    }(m, s, e, n, ch, counter));
    CHECK_FALSE(m.is_locked());
    CHECK(m.waiters() == 0);
    CHECK(s.available() == 2);
    CHECK_FALSE(e.is_set());
    CHECK(n.waiters() == 0);
    CHECK_FALSE(ch.try_receive().has_value());
    CHECK(counter.alive() == 0);  // the unsent value was destroyed, once
}

}  // TEST_SUITE("runtime/awaiter_move")
