// tests/compose/sync_test.cpp: the runtime's waits (locks, semaphores, channels, joins) under
// every combinator (tests/compose/compose.hpp). Each fixture's blocking form waits on a
// primitive another party holds; its recheck proves the cancelled wait took nothing: no lock,
// no permit, no value, no arrival.
#include <doctest/doctest.h>

#include <optional>
#include <utility>

#include <eddy/eddy.hpp>

#include "compose/compose.hpp"

using eddy::Task;
using eddy::test::run;
using eddy::test::compose::check_all;
using eddy::test::compose::paused;
using namespace std::chrono_literals;

namespace {

struct MutexLock {
    eddy::Mutex mutex;
    std::optional<eddy::MutexGuard> held;  // another party's hold, in the blocking form
    auto completing() { return mutex.lock(); }
    void check(eddy::MutexGuard g) { COMPOSE_CHECK((g.owns_lock() && mutex.is_locked())); }
    Task<void> hold() {
        held = mutex.try_lock();
        co_return;
    }
    auto blocking() { return mutex.lock(); }
    Task<void> recheck() {
        COMPOSE_CHECK(mutex.waiters() == 0);
        held.reset();  // free again: the timed-out wait did not take the lock on its way out
        COMPOSE_CHECK(!mutex.is_locked());
        co_await hold();
        COMPOSE_CHECK(held.has_value());
    }
};
TEST_CASE("sync: Mutex::lock") { check_all<MutexLock>(); }

struct RwLockRead {
    eddy::RwLock lock;
    std::optional<eddy::RwLock::WriteGuard> writer;
    auto completing() { return lock.read(); }
    void check(eddy::RwLock::ReadGuard g) { COMPOSE_CHECK((g.owns_lock() && lock.readers() == 1)); }
    Task<void> hold() {
        writer = lock.try_write();
        co_return;
    }
    auto blocking() { return lock.read(); }
    Task<void> recheck() {
        COMPOSE_CHECK((lock.waiters() == 0 && lock.readers() == 0 && lock.is_write_locked()));
        writer.reset();
        COMPOSE_CHECK(lock.try_read().has_value());
        co_await hold();
        COMPOSE_CHECK(writer.has_value());
    }
};
TEST_CASE("sync: RwLock::read") { check_all<RwLockRead>(); }

struct RwLockWrite {
    eddy::RwLock lock;
    std::optional<eddy::RwLock::ReadGuard> reader;
    auto completing() { return lock.write(); }
    void check(eddy::RwLock::WriteGuard g) { COMPOSE_CHECK((g.owns_lock() && lock.is_write_locked())); }
    Task<void> hold() {
        reader = lock.try_read();
        co_return;
    }
    auto blocking() { return lock.write(); }
    Task<void> recheck() {
        // A writer that gave up no longer keeps new readers out.
        COMPOSE_CHECK((lock.waiters() == 0 && lock.readers() == 1 && !lock.is_write_locked()));
        COMPOSE_CHECK(lock.try_read().has_value());
        co_return;
    }
};
TEST_CASE("sync: RwLock::write") { check_all<RwLockWrite>(); }

struct SemaphoreAcquire {
    eddy::Semaphore sem{0};
    Task<void> arm() {
        sem.release(1);
        co_return;
    }
    auto completing() { return sem.acquire(); }
    void check(std::monostate) { COMPOSE_CHECK(sem.available() == 0); }
    auto blocking() { return sem.acquire(); }
    Task<void> recheck() {
        COMPOSE_CHECK(sem.available() == 0);
        sem.release(1);  // given after the wait ended: still there for the next taker
        COMPOSE_CHECK(sem.try_acquire());
        co_return;
    }
};
TEST_CASE("sync: Semaphore::acquire") { check_all<SemaphoreAcquire>(); }

struct NotifyNotified {
    eddy::Notify notify;
    Task<void> arm() {
        notify.notify_one();
        co_return;
    }  // the stored permit
    auto completing() { return notify.notified(); }
    void check(std::monostate) { COMPOSE_CHECK(notify.waiters() == 0); }
    auto blocking() { return notify.notified(); }
    Task<void> recheck() {
        COMPOSE_CHECK(notify.waiters() == 0);
        notify.notify_one();
        co_await notify.notified();  // the permit was kept for this one
    }
};
TEST_CASE("sync: Notify::notified") { check_all<NotifyNotified>(); }

Task<void> arrive(eddy::Barrier& b) { co_await b.arrive_and_wait(); }

struct BarrierWait {
    eddy::Barrier barrier{2};
    std::uint64_t generation = 0;
    Task<void> arm() {
        generation = barrier.generation();
        eddy::spawn(arrive(barrier));  // the other party
        co_return;
    }
    auto completing() { return barrier.arrive_and_wait(); }
    void check(eddy::BarrierResult) { COMPOSE_CHECK(barrier.generation() == generation + 1); }
    Task<void> hold() {
        generation = barrier.generation();
        co_return;
    }
    auto blocking() { return barrier.arrive_and_wait(); }
    Task<void> recheck() {
        // The cancelled arrival was withdrawn: the generation waits for two new ones.
        COMPOSE_CHECK((barrier.waiting() == 0 && barrier.generation() == generation));
        co_return;
    }
};
TEST_CASE("sync: Barrier::arrive_and_wait") { check_all<BarrierWait>(); }

struct EventWait {
    eddy::Event set, unset;
    EventWait() { set.set(); }
    auto completing() { return set.operator co_await(); }
    void check(std::monostate) {}
    auto blocking() { return unset.operator co_await(); }
    Task<void> recheck() {
        COMPOSE_CHECK(!unset.is_set());
        co_return;
    }
};
TEST_CASE("sync: Event (co_await event)") { check_all<EventWait>(); }

TEST_CASE("sync: an Event is taken by the combinators as std::move(event), and borrowed") {
    eddy::Runtime rt(paused());
    run(rt, []() -> Task<void> {
        eddy::Event set, unset;
        set.set();
        co_await eddy::with_timeout(std::move(set), 1s);
        const bool in_time = co_await eddy::timeout_or(std::move(unset), 1s);
        CHECK_FALSE(in_time);
        auto r = co_await eddy::when_any(std::move(unset), eddy::sleep(1s));
        CHECK(r.index() == 1);
        unset.set();  // still the same Event: borrowed, never moved
        co_await std::move(unset);
    }());
}

struct LatchWait {
    eddy::Latch open{0}, closed{1};
    auto completing() { return open.wait(); }
    void check(std::monostate) {}
    auto blocking() { return closed.wait(); }
    Task<void> recheck() {
        COMPOSE_CHECK(!closed.try_wait());
        co_return;
    }
};
TEST_CASE("sync: Latch::wait") { check_all<LatchWait>(); }

struct LatchArriveAndWait {
    std::optional<eddy::Latch> latch;  // a new one per run: a latch is used once
    Task<void> arm() {
        latch.emplace(1);
        co_return;
    }
    auto completing() { return latch->arrive_and_wait(); }
    void check(std::monostate) { COMPOSE_CHECK(latch->try_wait()); }
    Task<void> hold() {
        latch.emplace(2);
        co_return;
    }
    auto blocking() { return latch->arrive_and_wait(); }
    Task<void> recheck() {
        // The arrival stays (a cancellation never undoes it): one more opens the latch.
        latch->count_down();
        COMPOSE_CHECK(latch->try_wait());
        return hold();
    }
};
TEST_CASE("sync: Latch::arrive_and_wait") { check_all<LatchArriveAndWait>(); }

struct ChannelSend {
    eddy::Channel<int> channel{1};
    auto completing() { return channel.send(5); }
    void check(std::monostate) { COMPOSE_CHECK(channel.try_receive() == 5); }
    Task<void> hold() {
        COMPOSE_CHECK(channel.try_send(1));
        co_return;
    }  // full
    auto blocking() { return channel.send(2); }
    Task<void> recheck() {
        // The cancelled send put nothing in: the channel holds the first value only.
        COMPOSE_CHECK((channel.size() == 1 && channel.try_receive() == 1 && channel.size() == 0));
        return hold();
    }
};
TEST_CASE("sync: Channel::send") { check_all<ChannelSend>(); }

struct ChannelReceive {
    eddy::Channel<int> channel{4};
    Task<void> arm() {
        COMPOSE_CHECK(channel.try_send(7));
        co_return;
    }
    auto completing() { return channel.receive(); }
    void check(std::optional<int> v) { COMPOSE_CHECK(v == 7); }
    auto blocking() { return channel.receive(); }
    Task<void> recheck() {
        COMPOSE_CHECK(channel.try_send(8));  // sent after the wait ended: not eaten by it
        const std::optional<int> v = co_await channel.receive();
        COMPOSE_CHECK(v == 8);
    }
};
TEST_CASE("sync: Channel::receive") { check_all<ChannelReceive>(); }

struct UnboundedReceive {
    eddy::UnboundedChannel<int> channel;
    Task<void> arm() {
        channel.send(7);
        co_return;
    }
    auto completing() { return channel.receive(); }
    void check(std::optional<int> v) { COMPOSE_CHECK(v == 7); }
    auto blocking() { return channel.receive(); }
    Task<void> recheck() {
        channel.send(8);
        const std::optional<int> v = co_await channel.receive();
        COMPOSE_CHECK(v == 8);
    }
};
TEST_CASE("sync: UnboundedChannel::receive") { check_all<UnboundedReceive>(); }

struct OneshotReceive {
    std::optional<eddy::oneshot::Sender<int>> tx;
    std::optional<eddy::oneshot::Receiver<int>> rx;
    void fresh() {
        auto [s, r] = eddy::oneshot::channel<int>();
        tx.emplace(std::move(s));
        rx.emplace(std::move(r));
    }
    Task<void> arm() {
        fresh();
        tx->send(7);
        co_return;
    }
    auto completing() { return std::move(*rx); }  // the receiver is the awaitable
    void check(int v) { COMPOSE_CHECK(v == 7); }
    Task<void> hold() {
        fresh();
        co_return;
    }
    auto blocking() { return std::move(*rx); }
    Task<void> recheck() {
        // The combinator owned the receiver and dropped it: the sender sees that.
        COMPOSE_CHECK(tx->is_closed());
        return hold();
    }
};
TEST_CASE("sync: oneshot::Receiver") { check_all<OneshotReceive>(); }

struct BroadcastReceive {
    std::pair<eddy::broadcast::Sender<int>, eddy::broadcast::Receiver<int>> ends = eddy::broadcast::channel<int>(4);
    Task<void> arm() {
        ends.first.send(3);
        co_return;
    }
    auto completing() { return ends.second.receive(); }
    void check(std::optional<int> v) { COMPOSE_CHECK(v == 3); }
    auto blocking() { return ends.second.receive(); }
    Task<void> recheck() {
        ends.first.send(4);
        const std::optional<int> v = co_await ends.second.receive();
        COMPOSE_CHECK(v == 4);
    }
};
TEST_CASE("sync: broadcast::Receiver::receive") { check_all<BroadcastReceive>(); }

struct WatchChanged {
    std::pair<eddy::watch::Sender<int>, eddy::watch::Receiver<int>> ends = eddy::watch::channel<int>(0);
    int next = 0;
    Task<void> arm() {
        ends.first.send(++next);
        co_return;
    }
    auto completing() { return ends.second.changed(); }
    void check(std::monostate) { COMPOSE_CHECK(*ends.second.borrow_and_update() == next); }
    auto blocking() { return ends.second.changed(); }
    Task<void> recheck() {
        ends.first.send(++next);  // the change after the wait ended is still news
        co_await ends.second.changed();
        COMPOSE_CHECK(*ends.second.borrow_and_update() == next);
    }
};
TEST_CASE("sync: watch::Receiver::changed") { check_all<WatchChanged>(); }

Task<int> forty_two() { co_return 42; }
Task<int> after_event(eddy::Event& e) {
    co_await e;
    co_return 9;
}

// No blocking form: awaiting a JoinHandle is not a cancellation point (see the case below).
struct JoinHandleAwait {
    eddy::Runtime* rt = nullptr;
    auto completing() {  // eddy::spawn on a worker, Runtime::spawn on the test thread
        return eddy::detail::current_scheduler() != nullptr ? eddy::spawn(forty_two()) : rt->spawn(forty_two());
    }
    void check(int v) { COMPOSE_CHECK(v == 42); }
};
TEST_CASE("sync: JoinHandle (co_await handle)") { check_all<JoinHandleAwait>(); }

TEST_CASE("sync: with_timeout(JoinHandle) gives the task's value when it finishes: a join is not cancelled") {
    eddy::Runtime rt(paused());
    run(rt, []() -> Task<void> {
        const auto t0 = eddy::time::now();
        std::optional<int> r = co_await eddy::timeout_or(eddy::spawn(eddy::test::compose::sleeper(5s)), 1s);
        CHECK(r == 1);
        CHECK(eddy::time::now() - t0 == 5s);
    }());
}

struct SpawnBlocking {
    eddy::Runtime* rt = nullptr;
    auto completing() {
        auto f = [] { return 42; };
        return eddy::detail::current_scheduler() != nullptr ? eddy::spawn_blocking(f) : rt->spawn_blocking(f);
    }
    void check(int v) { COMPOSE_CHECK(v == 42); }
};
TEST_CASE("sync: spawn_blocking's JoinHandle") { check_all<SpawnBlocking>(); }

struct JoinSetNext {
    eddy::JoinSet<int> set;
    eddy::Event never;
    Task<void> arm() {
        set.spawn(forty_two());
        co_return;
    }
    auto completing() { return set.join_next(); }
    void check(std::optional<int> v) { COMPOSE_CHECK(v == 42); }
    Task<void> hold() {
        if (set.size() == 0) set.spawn(after_event(never));  // runs until the set goes
        co_return;
    }
    auto blocking() { return set.join_next(); }
    Task<void> recheck() {
        set.spawn(forty_two());  // finished after the wait ended: its result is still there
        const std::optional<int> v = co_await set.join_next();
        COMPOSE_CHECK(v == 42);
        COMPOSE_CHECK(set.size() == 1);
    }
};
TEST_CASE("sync: JoinSet::join_next") { check_all<JoinSetNext>(); }

struct YieldNow {
    auto completing() { return eddy::yield_now(); }
    void check(std::monostate) {}
};
TEST_CASE("sync: yield_now") { check_all<YieldNow>(); }

}  // namespace
