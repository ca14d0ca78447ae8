// tests/sync/rw_lock_test.cpp: eddy::RwLock and its guards: shared reads and exclusive
// writes across workers, one FIFO line with writer preference and batches of readers, direct
// handover, try_read/try_write, cancellation of read and write waits (and what a cancelled
// writer passes on), runtime shutdown while tasks wait, and misuse.
//
// Tests that need "these tasks are waiting now" use one worker and eddy::test::settle(),
// where that is exact.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/sync/rw_lock.hpp>
#include <eddy/runtime/spawn.hpp>
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
using eddy::RwLock;
using eddy::Task;
using eddy::test::outcome;
using eddy::test::settle;

namespace {

/// Reads, logs `id` and how many readers hold the lock at that moment, holds it over a few
/// yields, then releases it.
Task<void> read_and_log(RwLock& l, std::vector<std::string>& log, std::string id) {
    RwLock::ReadGuard g = co_await l.read();
    log.push_back(id + "/" + std::to_string(l.readers()));
    co_await settle(2);
}

/// Writes, logs `id`, holds the lock over a few yields, then releases it.
Task<void> write_and_log(RwLock& l, std::vector<std::string>& log, std::string id) {
    RwLock::WriteGuard g = co_await l.write();
    log.push_back(id);
    co_await settle(2);
}

Task<void> read_once(RwLock& l) { RwLock::ReadGuard g = co_await l.read(); }
Task<void> write_once(RwLock& l) { RwLock::WriteGuard g = co_await l.write(); }
Task<void> read_counted(RwLock& l, eddy::test::Counted) { RwLock::ReadGuard g = co_await l.read(); }
Task<void> write_counted(RwLock& l, eddy::test::Counted) { RwLock::WriteGuard g = co_await l.write(); }

bool is_free(const RwLock& l) { return !l.is_write_locked() && l.readers() == 0 && l.waiters() == 0; }

/// Polls (yielding) until `l` has `n` waiters; false if the deadline passed first.
Task<bool> until_waiters(RwLock& l, std::size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + eddy::test::kDeadline;
    while (l.waiters() < n) {
        if (eddy::test::past(deadline)) co_return false;
        co_await eddy::yield_now();
    }
    co_return true;
}

}  // namespace

TEST_SUITE("sync/rw_lock") {

TEST_CASE("try_read shares, try_write excludes; guards release on destruction, early, and when moved") {
    RwLock l;
    std::optional<RwLock::ReadGuard> a = l.try_read();
    std::optional<RwLock::ReadGuard> b = l.try_read();
    REQUIRE(a.has_value());
    REQUIRE(b.has_value());
    CHECK(l.readers() == 2);
    CHECK_FALSE(l.try_write().has_value());
    RwLock::ReadGuard moved = std::move(*a);
    CHECK_FALSE(a->owns_lock());
    CHECK(moved.owns_lock());
    a.reset();  // a moved-from guard releases nothing
    CHECK(l.readers() == 2);
    moved.unlock();
    moved.unlock();  // idempotent
    CHECK_FALSE(moved);
    CHECK(l.readers() == 1);
    b.reset();
    CHECK(is_free(l));

    std::optional<RwLock::WriteGuard> w = l.try_write();
    REQUIRE(w.has_value());
    CHECK(l.is_write_locked());
    CHECK_FALSE(l.try_read().has_value());
    CHECK_FALSE(l.try_write().has_value());
    RwLock::WriteGuard other = std::move(*w);
    w.reset();
    CHECK(l.is_write_locked());
    {
        RwLock::WriteGuard sink = std::move(other);  // released at the end of this scope
    }
    CHECK(is_free(l));
    {
        std::optional<RwLock::WriteGuard> x = l.try_write();
        std::optional<RwLock::WriteGuard> y = l.try_write();
        CHECK(x.has_value());
        CHECK_FALSE(y.has_value());
        *x = std::move(*x);  // self-move keeps the lock
        CHECK(x->owns_lock());
    }
    CHECK(is_free(l));
}

TEST_CASE("readers share the lock while awaiting inside it") {
    Runtime rt(RuntimeConfig{.workers = 1});
    RwLock l;
    const std::size_t together = rt.block_on([](RwLock& lock) -> Task<std::size_t> {
        RwLock::ReadGuard mine = co_await lock.read();
        std::vector<std::string> log;
        co_await eddy::spawn(read_and_log(lock, log, "r"));  // gets in while this task reads
        co_return log.size() == 1 && log[0] == "r/2" ? lock.readers() : 0;
    }(l));
    CHECK(together == 1);
    CHECK(is_free(l));
}

TEST_CASE("writers exclude readers and each other on four workers, with awaits inside") {
    Runtime rt(RuntimeConfig{.workers = 4});
    RwLock l;
    long counter = 0;  // plain: only the write lock protects it
    std::atomic<int> readers_in{0}, writers_in{0}, violations{0};
    std::atomic<long> writes{0};
    constexpr int kTasks = 32, kOps = 60;
    rt.block_on([](RwLock& lock, long& count, std::atomic<int>& readers, std::atomic<int>& writers,
                   std::atomic<int>& errors, std::atomic<long>& write_count) -> Task<void> {
        auto worker = [](RwLock& rw, long& value, std::atomic<int>& reading, std::atomic<int>& writing,
                         std::atomic<int>& overlaps, std::atomic<long>& wrote, int id) -> Task<void> {
            for (int i = 0; i < kOps; ++i) {
                if ((i + id) % 4 == 0) {
                    RwLock::WriteGuard g = co_await rw.write();
                    if (writing.fetch_add(1) != 0 || reading.load() != 0) overlaps.fetch_add(1);
                    const long seen = value;
                    co_await eddy::yield_now();
                    value = seen + 1;
                    wrote.fetch_add(1);
                    writing.fetch_sub(1);
                } else {
                    RwLock::ReadGuard g = co_await rw.read();
                    reading.fetch_add(1);
                    if (writing.load() != 0) overlaps.fetch_add(1);
                    co_await eddy::yield_now();
                    if (writing.load() != 0) overlaps.fetch_add(1);
                    reading.fetch_sub(1);
                }
            }
        };
        std::vector<JoinHandle<void>> all;
        for (int id = 0; id < kTasks; ++id)
            all.push_back(eddy::spawn(worker(lock, count, readers, writers, errors, write_count, id)));
        for (auto& h : all) co_await std::move(h);
    }(l, counter, readers_in, writers_in, violations, writes));
    CHECK(violations.load() == 0);
    CHECK(writes.load() == kTasks * kOps / 4);
    CHECK(counter == writes.load());
    CHECK(is_free(l));
}

TEST_CASE("once a writer waits, later readers queue behind it even while readers hold the lock") {
    Runtime rt(RuntimeConfig{.workers = 1});
    RwLock l;
    std::vector<std::string> log;
    struct Result {
        bool reader_got_in = true;
        bool writer_next = false;
    };
    const Result r = rt.block_on([](RwLock& lock, std::vector<std::string>& events) -> Task<Result> {
        std::optional<RwLock::ReadGuard> held = lock.try_read();
        JoinHandle<void> w = eddy::spawn(write_and_log(lock, events, "w"));
        co_await settle();
        JoinHandle<void> rd = eddy::spawn(read_and_log(lock, events, "r"));
        co_await settle();
        Result result;
        result.reader_got_in = !events.empty() || lock.try_read().has_value();
        held.reset();  // the last reader leaves: the writer is handed the lock
        result.writer_next = lock.is_write_locked() && lock.readers() == 0;
        co_await std::move(w);
        co_await std::move(rd);
        co_return result;
    }(l, log));
    CHECK_FALSE(r.reader_got_in);
    CHECK(r.writer_next);
    CHECK(log == std::vector<std::string>{"w", "r/1"});
    CHECK(is_free(l));
}

TEST_CASE("one FIFO line: writers in order, each run of consecutive readers granted together, no barging") {
    Runtime rt(RuntimeConfig{.workers = 1});
    RwLock l;
    std::vector<std::string> log;
    struct Result {
        std::size_t waiting = 0;
        bool barged = true;
        std::size_t readers_after_release = 0;
    };
    const Result r = rt.block_on([](RwLock& lock, std::vector<std::string>& events) -> Task<Result> {
        std::optional<RwLock::WriteGuard> held = lock.try_write();
        std::vector<JoinHandle<void>> all;
        for (const char* id : {"r1", "r2", "w3", "r4", "w5", "r6", "r7"}) {
            const std::string name(id);
            if (name[0] == 'w') {
                all.push_back(eddy::spawn(write_and_log(lock, events, name)));
            } else {
                all.push_back(eddy::spawn(read_and_log(lock, events, name)));
            }
            co_await settle();  // each is queued before the next starts
        }
        Result result;
        result.waiting = lock.waiters();
        held.reset();  // r1 and r2 together; the lock is never free in between
        result.readers_after_release = lock.readers();
        result.barged = lock.try_read().has_value() || lock.try_write().has_value();
        for (auto& h : all) co_await std::move(h);
        co_return result;
    }(l, log));
    CHECK(r.waiting == 7);
    CHECK(r.readers_after_release == 2);
    CHECK_FALSE(r.barged);
    CHECK(log == std::vector<std::string>{"r1/2", "r2/2", "w3", "r4/1", "w5", "r6/2", "r7/2"});
    CHECK(is_free(l));
}

TEST_CASE("writers get the lock in the order they asked under contention across workers") {
    Runtime rt(RuntimeConfig{.workers = 4});
    RwLock l;
    std::vector<std::string> log;
    const bool queued = rt.block_on([](RwLock& lock, std::vector<std::string>& events) -> Task<bool> {
        std::optional<RwLock::ReadGuard> held = co_await lock.read();
        std::vector<JoinHandle<void>> all;
        bool waited = true;
        for (int id = 1; id <= 8; ++id) {
            all.push_back(eddy::spawn(write_and_log(lock, events, "w" + std::to_string(id))));
            waited = (co_await until_waiters(lock, static_cast<std::size_t>(id))) && waited;
        }
        held.reset();
        for (auto& h : all) co_await std::move(h);
        co_return waited;
    }(l, log));
    CHECK(queued);
    CHECK(log == std::vector<std::string>{"w1", "w2", "w3", "w4", "w5", "w6", "w7", "w8"});
}

TEST_CASE("a writer is not starved by readers that keep the lock busy on two workers") {
    // With reader preference the readers' overlapping holds could keep the writer out
    // forever; here the writer queues once and the readers that come later queue behind it.
    // The readers count their laps only from the moment the writer is about to ask (before
    // that they may run any number: how many depends on the machine's speed).
    Runtime rt(RuntimeConfig{.workers = 2});
    RwLock l;
    constexpr int kMaxLaps = 20000;
    std::atomic<bool> asking{false};
    std::atomic<bool> written{false};
    std::atomic<int> longest{0};
    rt.block_on(
        [](RwLock& lock, std::atomic<bool>& asked, std::atomic<bool>& wrote, std::atomic<int>& worst) -> Task<void> {
            auto reader = [](RwLock& rw, std::atomic<bool>& writer_asks, std::atomic<bool>& writer_done,
                             std::atomic<int>& longest_run) -> Task<void> {
                int laps = 0;  // since the writer started asking
                while (!writer_done.load() && laps < kMaxLaps) {
                    RwLock::ReadGuard g = co_await rw.read();
                    co_await eddy::yield_now();
                    if (writer_asks.load()) ++laps;
                }
                int seen = longest_run.load();
                while (laps > seen && !longest_run.compare_exchange_weak(seen, laps)) {
                }
            };
            std::vector<JoinHandle<void>> readers;
            for (int i = 0; i < 4; ++i) readers.push_back(eddy::spawn(reader(lock, asked, wrote, worst)));
            co_await settle();
            asked.store(true);
            {
                RwLock::WriteGuard g = co_await lock.write();
                wrote.store(true);
            }
            for (auto& h : readers) co_await std::move(h);
        }(l, asking, written, longest));
    CHECK(written.load());
    CHECK(longest.load() < kMaxLaps);
    CHECK(is_free(l));
}

TEST_CASE("a cancelled writer at the head lets the readers behind it in while readers hold the lock") {
    Runtime rt(RuntimeConfig{.workers = 1});
    RwLock l;
    std::vector<std::string> log;
    struct Result {
        std::string cancelled;
        std::size_t readers_while_held = 0;
    };
    const Result r = rt.block_on([](RwLock& lock, std::vector<std::string>& events) -> Task<Result> {
        std::optional<RwLock::ReadGuard> held = lock.try_read();
        std::stop_source stop;
        JoinHandle<void> w = eddy::spawn(eddy::with_stop_token(write_and_log(lock, events, "w"), stop.get_token()));
        co_await settle();
        JoinHandle<void> r1 = eddy::spawn(read_and_log(lock, events, "r1"));
        co_await settle();
        JoinHandle<void> r2 = eddy::spawn(read_and_log(lock, events, "r2"));
        co_await settle();
        stop.request_stop();  // r1 and r2 were only waiting for the writer
        Result result;
        result.cancelled = co_await outcome(std::move(w));
        result.readers_while_held = lock.readers();
        co_await std::move(r1);
        co_await std::move(r2);
        co_return result;
    }(l, log));
    CHECK(r.cancelled == "cancelled");
    CHECK(r.readers_while_held == 3);
    CHECK(log == std::vector<std::string>{"r1/3", "r2/3"});
    CHECK(is_free(l));
}

TEST_CASE("a cancelled writer between readers joins them into one batch; a cancelled reader takes nothing") {
    Runtime rt(RuntimeConfig{.workers = 1});
    RwLock l;
    std::vector<std::string> log;
    struct Result {
        std::string writer, reader;
        std::size_t waiting = 0;
    };
    const Result r = rt.block_on([](RwLock& lock, std::vector<std::string>& events) -> Task<Result> {
        std::optional<RwLock::WriteGuard> held = lock.try_write();
        std::stop_source stop_w, stop_r;
        JoinHandle<void> r1 = eddy::spawn(read_and_log(lock, events, "r1"));
        co_await settle();
        JoinHandle<void> w2 = eddy::spawn(eddy::with_stop_token(write_and_log(lock, events, "w2"), stop_w.get_token()));
        co_await settle();
        JoinHandle<void> r3 = eddy::spawn(eddy::with_stop_token(read_and_log(lock, events, "r3"), stop_r.get_token()));
        co_await settle();
        JoinHandle<void> r4 = eddy::spawn(read_and_log(lock, events, "r4"));
        co_await settle();
        Result result;
        stop_w.request_stop();
        result.writer = co_await outcome(std::move(w2));
        stop_r.request_stop();
        result.reader = co_await outcome(std::move(r3));
        result.waiting = lock.waiters();  // r1 and r4, still behind the writer that holds it
        held.reset();
        co_await std::move(r1);
        co_await std::move(r4);
        co_return result;
    }(l, log));
    CHECK(r.writer == "cancelled");
    CHECK(r.reader == "cancelled");
    CHECK(r.waiting == 2);
    CHECK(log == std::vector<std::string>{"r1/2", "r4/2"});
    CHECK(is_free(l));
}

TEST_CASE("a waiter handed the lock before its cancel took effect keeps it") {
    Runtime rt(RuntimeConfig{.workers = 1});
    RwLock l;
    std::vector<std::string> log;
    const std::string how = rt.block_on([](RwLock& lock, std::vector<std::string>& events) -> Task<std::string> {
        std::optional<RwLock::ReadGuard> held = lock.try_read();
        std::stop_source stop;
        JoinHandle<void> w = eddy::spawn(eddy::with_stop_token(write_and_log(lock, events, "w"), stop.get_token()));
        co_await settle();
        held.reset();         // hands the lock to the writer...
        stop.request_stop();  // ...before the stop: the grant wins
        co_return co_await outcome(std::move(w));
    }(l, log));
    CHECK(how == "ok");
    CHECK(log == std::vector<std::string>{"w"});
    CHECK(is_free(l));
}

TEST_CASE("awaiting under a stopped token throws at once, even when the lock is free") {
    Runtime rt(RuntimeConfig{.workers = 1});
    RwLock l;
    std::stop_source stop;
    stop.request_stop();
    CHECK(rt.block_on(outcome(rt.spawn(eddy::with_stop_token(read_once(l), stop.get_token())))) == "cancelled");
    CHECK(rt.block_on(outcome(rt.spawn(eddy::with_stop_token(write_once(l), stop.get_token())))) == "cancelled");
    CHECK(is_free(l));
}

TEST_CASE("stops racing releases on two workers never lose or leak the lock") {
    // Each round: a cancellable waiter (reader or writer) queues behind a holder, with an
    // uncancellable reader behind it; the holder lets go while another task stops the
    // waiter. Whoever wins, everyone finishes and the lock ends free.
    Runtime rt(RuntimeConfig{.workers = 2});
    RwLock l;
    const int bad = rt.block_on([](RwLock& lock) -> Task<int> {
        int failures = 0;
        for (int i = 0; i < 300; ++i) {
            const bool write_held = i % 2 == 0;
            const bool write_waits = i % 3 != 0;
            std::optional<RwLock::WriteGuard> w;  // the holder: one of the two
            std::optional<RwLock::ReadGuard> r;
            if (write_held) {
                w = co_await lock.write();
            } else {
                r = co_await lock.read();
            }
            std::stop_source stop;
            Task<void> wait = write_waits ? write_once(lock) : read_once(lock);  // a local: see sync_stress
            JoinHandle<void> waiter = eddy::spawn(eddy::with_stop_token(std::move(wait), stop.get_token()));
            if (write_held || write_waits) {  // else the reader gets in at once
                if (!co_await until_waiters(lock, 1)) ++failures;
            }
            JoinHandle<void> behind = eddy::spawn(read_once(lock));
            auto stop_it = [](std::stop_source s) -> Task<void> {
                s.request_stop();
                co_return;
            };
            auto release = [](std::optional<RwLock::WriteGuard> write_guard,
                              std::optional<RwLock::ReadGuard> read_guard) -> Task<void> {
                write_guard.reset();
                read_guard.reset();
                co_return;
            };
            // The last spawned runs first here unless the other worker steals one: alternate.
            JoinHandle<void> first =
                i % 4 < 2 ? eddy::spawn(stop_it(stop)) : eddy::spawn(release(std::move(w), std::move(r)));
            JoinHandle<void> second =
                i % 4 < 2 ? eddy::spawn(release(std::move(w), std::move(r))) : eddy::spawn(stop_it(stop));
            const std::string how = co_await outcome(std::move(waiter));
            if (how != "ok" && how != "cancelled") ++failures;
            if (co_await outcome(std::move(behind)) != "ok") ++failures;
            co_await std::move(first);
            co_await std::move(second);
            if (!is_free(lock)) ++failures;
        }
        co_return failures;
    }(l));
    CHECK(bad == 0);
    CHECK(is_free(l));
}

TEST_CASE("a runtime destroyed while tasks wait unlinks them; a handover to a destroyed frame is released") {
    eddy::test::LifetimeCounter frames;
    RwLock l;
    std::optional<RwLock::WriteGuard> held = l.try_write();
    {
        Runtime rt(RuntimeConfig{.workers = 2});
        for (int i = 0; i < 4; ++i) {
            (void)rt.spawn(read_counted(l, eddy::test::Counted(frames)));
            (void)rt.spawn(write_counted(l, eddy::test::Counted(frames)));
        }
        const auto deadline = std::chrono::steady_clock::now() + eddy::test::kDeadline;
        while (l.waiters() < 8 && !eddy::test::past(deadline)) std::this_thread::yield();
        REQUIRE(l.waiters() == 8);
    }
    CHECK(frames.alive() == 0);
    CHECK(l.waiters() == 0);
    held.reset();
    CHECK(is_free(l));

    // Releasing from this thread hands the lock to waiting readers (then the writer) and the
    // runtime is destroyed at once: some rounds destroy granted frames before they ran.
    for (int round = 0; round < 20; ++round) {
        RwLock m;
        std::optional<RwLock::WriteGuard> h = m.try_write();
        {
            Runtime rt(RuntimeConfig{.workers = 2});
            for (int i = 0; i < 3; ++i) (void)rt.spawn(read_once(m));
            (void)rt.spawn(write_once(m));
            const auto deadline = std::chrono::steady_clock::now() + eddy::test::kDeadline;
            while (m.waiters() < 4 && !eddy::test::past(deadline)) std::this_thread::yield();
            REQUIRE(m.waiters() == 4);
            h.reset();
        }
        CHECK(is_free(m));
    }
}

TEST_CASE("misuse: reading or writing off a worker throws WrongThread and takes nothing") {
    RwLock l;
    std::string how;
    eddy::test::await_off_worker([&l] { return l.read(); }, how);
    CHECK(how == "wrong thread");
    how.clear();
    eddy::test::await_off_worker([&l] { return l.write(); }, how);
    CHECK(how == "wrong thread");
    CHECK(is_free(l));
}

}  // TEST_SUITE("sync/rw_lock")
