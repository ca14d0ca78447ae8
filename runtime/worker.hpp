// runtime/worker.hpp: one worker thread: its queues, its run loop, stealing and parking.
//
// # The queues, and the order they keep
// A worker takes runnable tasks from five places:
//   * the global wake queue (shared, Scheduler::global_wakes): what the reactor completes
//     (I/O, timers) and wake-ups from threads that are not this runtime's workers;
//   * the LIFO slot: the one task this worker made runnable last (a spawn or a wake-up by a
//     task running here); it runs as soon as the current task suspends;
//   * the wake queue (wakes_): tasks woken here (channel, lock, event, join...), oldest
//     first: a FIFO. The owner takes its top, thieves too;
//   * the spawn deque (deque_): tasks spawned here and when_all's children, newest first:
//     the owner takes its bottom, so a fork-join tree runs depth first (bounded memory,
//     warm caches), and thieves take its top, the oldest and largest pieces of work;
//   * the yield list (deferred_): tasks that yielded (yield_now, the cooperative budget),
//     oldest first; whenever the spawn deque is empty when its turn comes, it is refilled
//     from the yield list.
// The wake queue and the spawn deque take turns while both hold tasks, so neither kind of
// work starves the other, and a fork-join tree (no wake-ups) or a service (few spawns) runs
// as if the other queue were not there. So a task that yields waits behind the spawned
// tasks queued before it and, under a steady stream of wake-ups, one woken task per spawned
// or yielded one: a service's tasks that use up their cooperative budget keep going.
//
// # Input first
// Tasks woken from outside the worker run before its own queues: at every turn, once the
// global wake queue has received something since the last look (a counter the reactor
// bumps, Scheduler::global_wake_pushes: one load per turn), the worker takes from it, up to
// kMaxGlobalRun tasks in a row, then one of its own queues' tasks. In a server that means
// every connection whose input arrived is read before the tasks woken by earlier input run:
// a chat server's readers broadcast all the lines that came in before its pumps and writers
// run, so each writer sends more lines per system call. Measured (the chat server of
// examples/, 200 clients in rooms of 100, pubsub_load): 6.8 M lines/s against 4.9 M with
// the global wake-ups joining the end of the wake queue, and 4.1-4.9 M taking turns with
// it; 0.15 against 0.21 us of server CPU per line.
// A share of the global wake queue that the worker pulled into its own wake queue (with
// nothing else to run, pull_global_wakes) runs before the global queue is looked at again:
// those tasks were woken before anything still there. Taking turns with the global queue
// instead, the share ran one task per kMaxGlobalRun + 1 polls behind newer input: a
// static-file server at 1 worker (examples/file_server, wrk with 64 connections, 16 and
// 64 KiB files) saw woken connections wait up to 13-25 ms (RuntimeMetrics's scheduling
// delay) and a p99 of 9-16 ms; in order, at most 1.3-6.6 ms and a p99 of 1.6-2.1 ms.
// The share is marked by the wake queue's index past its end (share_end_): its turn ends when
// the queue's top reaches it, whether the worker ran the share's tasks or thieves took some.
// An overflow of the wake queue ends the share's turn.
//
// # The bound
// A woken task never waits behind a task woken after it on its worker, except for the LIFO
// slot's runs and the global wake queue's (not a share pulled from it: that runs first, in
// order), and waits behind at most one spawned (or yielded) task per wake-up ahead of it.
// In polls of its worker:
//     waited <= (A + 1) x (kMaxLifoRuns + 2 x kMaxGlobalRun + 3)
// where A is the number of tasks woken before it and still queued there when it was woken:
// each of them (and the slot chain running at its wake-up) may be preceded by a slot chain,
// a spawned task, twice kMaxGlobalRun global wake-ups (around that spawned task) and one
// task of the global spawn queue per interval. That holds as long as the wake queue does not
// overflow (past its 1,024 slots the older half waits in the global wake queue, which runs
// first). tests/runtime/wake_order_test.cpp checks it under a steady stream of wake-ups,
// with and without wake-ups from another thread. Newest first, the old order, is right for
// forks and wrong for wake-ups: under such a stream a task woken early sank under every task
// woken after it (11,648 polls there, where this bound allows 51 per task ahead). Tokio runs
// its whole local queue oldest first (with the LIFO slot, capped at 3); Go does the same with
// `runnext`. eddy keeps woken and spawned tasks apart so that forks stay depth first.
//
// # The run loop, each turn
//   1. next_task(): every global_queue_interval_-th turn a task of the global spawn queue
//      runs, and the next task the spawn deque gives is its oldest: spawned work cannot
//      starve behind woken work. Then the global wake queue (input first, above); the LIFO
//      slot (capped, below); the wake queue's oldest and the spawn deque's newest (or the
//      yield list's oldest), taking turns; and with nothing local, the global queues' share.
//   2. Otherwise steal_work(): become a searcher (idle.hpp, rule 2), steal half of a random
//      victim's wake queue, else half of its spawn deque, else take from the global queues;
//      a searcher retries for a few microseconds (spin_for_work) before it parks.
//   3. Otherwise park() until notified (idle.hpp, rule 4 closes the lost-wakeup window).
// Operations that tasks hand to the I/O driver are flushed (Driver::flush: wake the reactor
// if it sleeps) when the worker runs out of local work and every kDriverFlushInterval-th
// turn: a worker that resumes 64 connections wakes the reactor once, not 64 times. A task
// that runs long between two flushes cannot hold an operation back for long either: the
// reactor never sleeps more than a millisecond while a worker is unparked (reactor.hpp).
// A worker that found work while searching stops searching (rule 3) before running it.
//
// # The global queues
// Two, kept apart like the local ones (Scheduler::global_wakes, global_spawns). The wake
// queue holds what the reactor completes, wake-ups from other threads and wake queues'
// overflow; the spawn queue holds spawns from other threads and spawn deques' overflow. A
// worker with nothing local takes a share of the global wake-ups in proportion to their
// depth (depth / workers, at least kGlobalBatch when there are that many, at most what its
// wake queue has room for) into its wake queue, where idle workers can steal them, else a
// batch of spawned tasks into its spawn deque. (One queue for both kinds sent overflowed
// fork-join siblings, the oldest and largest subtrees, into the FIFO ahead of the deque:
// fib(25) turned breadth first.)
//
// # The LIFO slot
// A task that a worker schedules for itself runs next on that worker; the task it displaces
// goes to its queue (a woken task to the wake queue, a spawned one to the spawn deque: the
// slot's word carries which, in bit 1), where it can be stolen, and only then is an idle
// worker woken. This is Tokio's LIFO slot: a chain of spawns or a request/response pair
// stays on one warm core instead of bouncing between workers, and a producer pays for a
// wake-up only when there is a second task to share.
// What keeps the slot from holding a task hostage:
//   * at most kMaxLifoRuns (16) slot tasks run back to back while other local tasks wait;
//     then the slot's task joins its queue and another queued task runs (the other queue's,
//     else the oldest of its own). So a pair of tasks waking each other through the
//     slot delays a queued task by at most 8 exchanges. Tokio caps at 3, but each cap costs
//     a switch to another task and, with 2 workers, often splits a pair between them;
//     ping_pong (1 / 2 workers) against no cap, medians of 7: cap 3 0.86x / 0.80x (0.68x /
//     0.43x in a table run), 8 0.94x / 0.96x, 16 0.96x / 1.04x, 32 0.99x / 1.07x.
//   * while the current task runs long without suspending, the watchdog (watchdog.hpp)
//     marks the poll stale and wakes an idle worker, which may then take the slot's task:
//     a child spawned before a long computation does not wait for it to end. The slot is
//     an atomic for that: the owner and such a thief exchange it, and one of them gets it.
//
// Fields are owned by the worker thread unless marked: other threads touch only deque_ and
// wakes_ (steal_into, empty) and parker_ (unpark).
#pragma once

#include "private.hpp"
#include "chase_lev_deque.hpp"
#include <eddy/runtime/detail/owned_counter.hpp>
#include "inject_queue.hpp"
#include "parker.hpp"
#include "queue_item.hpp"
#include "poll_site.hpp"
#include "sched_delay.hpp"
#include <eddy/tasks/detail/spin_lock.hpp>
#include <eddy/runtime/metrics.hpp>

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <deque>

#ifndef EDDY_LOCAL_QUEUE_CAPACITY
#define EDDY_LOCAL_QUEUE_CAPACITY 256
#endif

namespace eddy::detail {

class Scheduler;

/// Slots per worker queue (the spawn deque and the wake queue each). 256 is Tokio's choice (a
/// guess it never retuned); it keeps a queue within 2 KiB. The small_queues build option
/// shrinks it to 4 so that overflow and steal-the-last-item paths run constantly in tests.
inline constexpr std::size_t kLocalQueueCapacity = EDDY_LOCAL_QUEUE_CAPACITY;
inline constexpr std::size_t kWakeQueueCapacity = kLocalQueueCapacity * 4;

/// How often a busy worker flushes what its tasks posted to the I/O driver (see above).
/// Per task, the reactor went back to sleep and was woken again between two tasks; every
/// 16th turn halved the echo benchmark's eddy-to-Tokio ratio less (measured: 0.53x per task,
/// 0.75x batched, one worker).
inline constexpr std::uint32_t kDriverFlushInterval = 16;

/// Search rounds (each a pause, then a steal attempt over every victim and the global queue)
/// before a searcher parks. Parking and being woken costs a futex round trip on both sides,
/// so a short spin pays when work arrives in bursts (spawn_many with 2 workers: fewer
/// wake-ups). A guess tuned on the spawn_many/chained_spawn benchmarks; retune with data.
inline constexpr int kSpinRounds = 16;
inline constexpr int kPausesPerRound = 64;
/// Rounds a worker alone in running spins after asking the I/O driver for the completions it
/// holds (Driver::worker_out_of_work): the driver hands them over within microseconds.
inline constexpr int kSpinRoundsForDriver = 4;

/// A visit to the global queue takes its share, depth / workers, but at least this many (when
/// there are), and never more than the wake queue has room for: enough to amortize the
/// queue's cost, few enough to leave work for the other workers.
inline constexpr std::size_t kGlobalBatch = 32;

/// Slot tasks a worker runs back to back while other local tasks wait (Tokio: 3; see the
/// LIFO slot above for why 16).
inline constexpr std::uint32_t kMaxLifoRuns = 16;

/// Tasks of the global wake queue a worker runs back to back before it takes one of its own
/// queues' tasks again ("Input first" above).
inline constexpr std::uint32_t kMaxGlobalRun = 16;

/// A worker's statistics (eddy/runtime/metrics.hpp): written by the worker thread only.
struct WorkerStats {
    OwnedCounter polled, spawned, completed, steal_attempts, steals, stolen, global_takes, parks, unparks, overflows,
        overflowed, budget_yields;
};

class Worker {
public:
    Worker(Scheduler& scheduler, std::size_t index);
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;

    /// The thread body.
    void run();

    /// A spawned root frame not polled yet, queued so only when on_task_first_poll is set
    /// (Scheduler::spawn): frames are 16-aligned, and this bit is never set otherwise.
    static constexpr std::uintptr_t kFirstPollTag = 4;

    /// Owner thread: makes the spawned `task` the next to run here (the LIFO slot). Returns
    /// true when this displaced an earlier task into its queue, i.e. when a helper could
    /// take one.
    bool schedule_next(void* task) noexcept { return fill_slot(task); }
    /// Owner thread: the same for a woken task; displaced later, it joins the wake queue.
    bool schedule_woken(void* task) noexcept {
        return fill_slot(reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(task) | kWokenTag));
    }
    /// Owner thread: queues a spawned task on the spawn deque; half of a full deque moves to
    /// the global queue first.
    void push_local(void* task) noexcept {
        spawns_maybe_ = true;
        if (!deque_.push(task)) overflow_spawn(task);
    }
    /// Owner thread: queues a task woken now at the end of the wake queue (overflowing the
    /// same way).
    void push_woken(void* task) noexcept { push_wake(QueueItem{task, wake_stamp()}); }
    /// Owner thread: queues a task behind everything else runnable here (yield_now).
    void defer(void* task) { deferred_.push_back(task); }
    /// The running task handed the I/O driver something: flush it when the task suspends.
    void note_driver_work() noexcept { driver_pending_ = true; }

    /// After the thread was joined (shutdown): forgets every queued task.
    void clear_queues() noexcept;

    /// Owner thread: the counters to add to. Any thread: metrics().
    WorkerStats& stats() noexcept { return stats_; }
    WorkerMetrics metrics() const noexcept;

    /// Any thread: odd while the worker runs a queue item, even between two; one more at each
    /// start and end (the watchdog tells a long poll by an odd value that does not move).
    std::uint64_t poll_seq() const noexcept { return poll_seq_.load(std::memory_order_relaxed); }
    /// The watchdog: the poll `seq` has run long; an idle worker may take the slot's task
    /// (0: no poll is stale, the mark is cleared once the poll ended).
    void mark_stale(std::uint64_t seq) noexcept { stale_seq_.store(seq, std::memory_order_relaxed); }
    /// The watchdog: the task name and await site of the poll `seq` (odd), copied; false
    /// when they are not recorded (not a task-dump build, no slow_poll_threshold) or the
    /// poll ended meanwhile (poll_site.hpp).
    bool poll_site(std::uint64_t seq, PollSite::Copy& out) const noexcept {
#if EDDY_TASK_DUMP
        return watch_every_poll_ && site_.read(poll_seq_, seq, out);
#else
        (void)seq;
        (void)out;
        return false;
#endif
    }
    /// Any thread: a task waits in the LIFO slot (a hint).
    bool slot_occupied() const noexcept { return lifo_slot_.load(std::memory_order_relaxed) != nullptr; }
    /// A thief: the slot's task, if this worker is still in the poll the watchdog marked
    /// stale (else nullptr).
    void* steal_slot() noexcept;
    void wake_watchdog() noexcept;

    /// A task dump, while this worker is paused (or is the dumping one): every queued item.
    template <class F>
    void for_each_queued(F&& f) const {
        // Acquire: pairs with the release half of the exchanges that filled the slot.
        if (void* t = lifo_slot_.load(std::memory_order_acquire)) f(untag_first_poll(untag(t)));
        auto task_of = [&f](const QueueItem& item) { f(item.task); };
        wakes_.for_each_quiescent(task_of);
        auto spawned = [&f](void* t) { f(untag_first_poll(t)); };
        deque_.for_each_quiescent(spawned);
        for (void* t : deferred_) f(t);
    }

    Scheduler& scheduler() const noexcept { return sched_; }
    std::size_t index() const noexcept { return index_; }
    /// Any thread: whether either queue holds a task (an estimate while others push or steal).
    bool has_queued() const noexcept { return !wakes_.empty() || !deque_.empty(); }
    Parker& parker() noexcept { return parker_; }  // any thread: unpark

private:
    // Bit 1 of the slot's word: the task in it was woken (it returns to the wake queue when
    // displaced), not spawned. Frames are 16-aligned and Runnables 8-aligned; bit 0 is the
    // Runnable tag (scheduler_api.hpp), which stays as it is.
    static constexpr std::uintptr_t kWokenTag = 2;
    static void* untag_first_poll(void* item) noexcept {
        return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(item) & ~kFirstPollTag);
    }
    static void* untag(void* tagged) noexcept {
        return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(tagged) & ~kWokenTag);
    }
    /// Owner thread: puts `tagged` in the slot; what it displaces goes to its queue.
    bool fill_slot(void* tagged) noexcept {
        // Acq_rel: release publishes the task to a thief's acquire exchange (steal_slot);
        // acquire pairs with the release of the exchange that put the displaced one there.
        void* displaced = lifo_slot_.exchange(tagged, std::memory_order_acq_rel);
        if (displaced == nullptr) {
            // A task now waits in the slot: if the driver sleeps without watching (every
            // worker was parked when it went to sleep), it must watch, in case this poll
            // runs long. Seq_cst load: the driver stores the flag, then looks at the idle
            // state (seq_cst both), and this worker was counted unparked (a seq_cst RMW)
            // before it ran: either the driver sees us and does not sleep unwatched, or we
            // see the flag here.
            if (unwatched_->load(std::memory_order_seq_cst)) wake_watchdog();
            return false;
        }
        requeue(displaced, wake_stamp());
        return true;
    }
    /// A task out of the slot (tagged) goes to its queue; a woken one stamped `now`.
    void requeue(void* tagged, std::uint64_t now) noexcept {
        if ((reinterpret_cast<std::uintptr_t>(tagged) & kWokenTag) != 0) {
            push_wake(QueueItem{untag(tagged), now});
        } else {
            push_local(tagged);
        }
    }
    /// The stamp of a task woken during the current poll: one clock read per poll, at its
    /// first wake-up (sched_delay.hpp).
    std::uint64_t wake_stamp() noexcept {
        if (poll_ticks_ == 0) poll_ticks_ = sched_ticks();
        return poll_ticks_;
    }
    /// The task to run: a woken one's wait goes into the histogram (`now`: a clock reading
    /// just taken, or 0).
    void* take(const QueueItem& item, std::uint64_t now = 0) noexcept {
        if (item.woken()) delay_.record(item.stamp, now != 0 ? now : sched_ticks());
        return item.task;
    }
    /// Queues a woken task at the end of the wake queue; half of a full queue moves to the
    /// global wake queue first.
    void push_wake(QueueItem item) noexcept {
        wakes_maybe_ = true;
        if (!wakes_.push(item)) overflow_wake(item);
    }
    void overflow_wake(QueueItem item) noexcept;
    void overflow_spawn(void* task) noexcept;
    template <class T, class Global>
    void push_overflowing(ChaseLevDeque<T>& q, Global& global, typename Global::ProducerToken& token, T item) noexcept;
    void* next_task();
    void* steal_work();
    void* spin_for_work(bool delivery_due);
    void park();
    void leave_searching() noexcept;
    /// A task of the global wake queue, if it may hold one and fewer than kMaxGlobalRun ran
    /// since the last pop of a local queue; else nullptr.
    void* take_global_wake();
    /// The hooks and the poll timer around one poll (RuntimeConfig::on_poll_start, ...):
    /// before_poll returns `task` untagged and keeps the poll's start in poll_started_.
    /// Out of line and cold, and nothing of the loop's own passes by reference, so that a
    /// runtime without hooks pays two predicted branches per poll and no spilled local.
    [[gnu::noinline, gnu::cold]] void* before_poll(void* task);
    [[gnu::noinline, gnu::cold]] void after_poll();
    /// The next task of the wake queue or the spawn deque (they take turns), or nullptr.
    /// `now`: a clock reading just taken, or 0.
    void* take_queued(std::uint64_t now = 0);
    /// The spawn deque's next task (its newest, or its oldest when the interval says so).
    void* take_spawned();
    /// Moves the global wake-ups' share to the end of the wake queue; returns how many.
    std::size_t pull_global_wakes();
    /// Owner: the oldest task of the wake queue.
    bool pop_wake(QueueItem& item) noexcept { return wakes_.pop_top(item); }
    /// One task from the global spawn queue.
    bool pop_global_spawn(void*& out);
    /// With nothing local: the global wake-ups' share (the oldest runs), else a batch of
    /// spawned tasks (the first runs). nullptr when both are empty.
    void* take_global();
    /// The yield list's oldest tasks to the empty spawn deque, to be popped in order.
    void refill_from_deferred();
    std::uint64_t next_random() noexcept;

    Scheduler& sched_;
    const std::size_t index_;
    const std::atomic<bool>* const unwatched_;  // Scheduler::unwatched_flag()
    const bool watch_every_poll_;               // slow_poll_threshold set: see park()
    // A poll hook, the first-poll hook or the poll timer is set: before_poll/after_poll run.
    // Read once per poll next to poll_seq_'s line; constant, so the branch predicts.
    const bool instrumented_;
    const bool time_polls_;           // RuntimeConfig::poll_time_histogram
    std::uint64_t poll_started_ = 0;  // before_poll's clock reading, for after_poll
    ChaseLevDeque<void*> deque_;      // spawned tasks: the owner pops the newest
    ChaseLevDeque<QueueItem> wakes_;  // woken tasks: the owner pops the oldest
    Parker parker_;
    InjectQueue::ProducerToken wake_producer_;  // Scheduler::global_wakes()
    InjectQueue::ConsumerToken wake_consumer_;
    SpawnQueue::ProducerToken spawn_producer_;  // Scheduler::global_spawns()
    SpawnQueue::ConsumerToken spawn_consumer_;
    // The next task to run (tagged: kWokenTag). Exchanged by the owner, and by a thief only
    // in a stale poll.
    std::atomic<void*> lifo_slot_{nullptr};
    std::uint32_t lifo_runs_ = 0;  // slot tasks run back to back
    bool spawn_turn_ = false;      // take_queued: the spawn deque's turn next
    // False only when that queue is known to be empty: only this thread adds to its own
    // queues, so once it saw one empty it stays empty until this thread pushes (a wake-up
    // or a spawn, a share of a global queue, a steal, the yield list). Spares a worker two
    // loads per turn for a queue it does not use, or a pop that would find nothing.
    bool wakes_maybe_ = false;
    bool spawns_maybe_ = false;
    std::uint64_t seen_wake_pushes_ = 0;  // Scheduler::global_wake_pushes() at the last look
    bool global_maybe_ = false;           // the global wake queue may hold tasks
    std::uint32_t global_run_ = 0;        // global wake-ups run since the last local queue pop
    // The wake queue's index just past the last share of global wake-ups moved into it
    // (pull_global_wakes). While the queue's top is below it, some of the share (or a
    // wake-up queued before it) is still there, and the global queue waits
    // (take_global_wake): those are older. Thieves that take part of the share move the top
    // as the owner's pops do, so the share's turn ends as soon as this worker sees its last
    // task gone (a relaxed load of the top: at the latest at its next pop). An overflow
    // (overflow_wake) resets it to 0: the oldest part went back to the global queue, which
    // runs first.
    std::int64_t share_end_ = 0;
    bool oldest_spawn_next_ = false;  // the spawn deque's next task is its oldest (interval)
    std::uint64_t poll_ticks_ = 0;    // wake_stamp()'s reading for this poll; 0: none yet
    // Relaxed: hints for the watchdog and thieves; the slot's exchange is what decides.
    // Release for the odd store in task-dump builds watched for slow polls (pairs with
    // PollSite::read()'s acquire load); relaxed otherwise.
    std::atomic<std::uint64_t> poll_seq_{0};  // written by the owner only, twice per poll
#if EDDY_TASK_DUMP
    PollSite site_;  // what this poll resumed (published only with watch_every_poll_)
#endif
    // Written by the watchdog only, rarely; on a line of its own, since searching workers
    // read it at every steal attempt: reading poll_seq_ (or the slot) there would pull the
    // busy owner's line away at every look.
    alignas(64) std::atomic<std::uint64_t> stale_seq_{0};
    alignas(64) std::deque<void*> deferred_;  // yielded tasks, oldest first
    std::uint32_t tick_ = 0;
    // How often a busy worker looks at the global queue first: RuntimeConfig::
    // global_queue_interval (61 by default, like Tokio: prime so that it does not fall into
    // step with periodic task patterns). A countdown, not tick_ % interval: no division.
    const std::uint32_t global_queue_interval_;
    std::uint32_t global_countdown_;
    bool searching_ = false;
    std::uint64_t seen_external_spawns_ = 0;  // Scheduler::external_spawns() at the last spin
    bool driver_pending_ = false;             // see note_driver_work()
    std::uint64_t rng_;
    WorkerStats stats_;
    SchedDelayRecorder delay_;
    SchedDelayRecorder poll_time_;  // the same recorder, fed with (poll start, poll end)
};

/// The worker running on the calling thread, or nullptr.
Worker* current_worker() noexcept;

}  // namespace eddy::detail
