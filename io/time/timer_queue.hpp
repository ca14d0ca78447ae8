// io/time/timer_queue.hpp: one worker's pending timers: a TimerWheel (timer_wheel.hpp) under a
// spin lock. See eddy/time/detail/timer.hpp for the entry's protocol.
//
// # Why per worker
// The common timer is armed and disarmed before it fires (a per-read deadline, a sleep that
// loses a when_any): both happen on the worker that runs the task, so the lock is that
// worker's own unless a timer is disarmed or cancelled elsewhere, or the reactor fires.
//
// # The earliest wake-up and the reactor's sleep
// earliest_ is when this queue next needs the reactor (TimerWheel::next_wake(); kNone when
// empty): a lower bound, lowered under the lock by an arm that needs the reactor sooner, and
// recomputed by the reactor after it fires. The reactor sleeps until the smallest earliest_
// of all queues. An arm that lowers it publishes the new value (seq_cst), then reads how long
// the reactor means to sleep (Reactor::wake_at_, seq_cst) and wakes it if that is too long;
// the reactor publishes wake_at_ (seq_cst), then reads every earliest_ once more. So either
// the reactor sees the new deadline or the arming worker sees that it must wake it (a
// store-buffering pair on seq_cst operations). A disarm leaves earliest_ alone: the reactor
// may wake early for nothing, which it handles by looking again.
#pragma once

#include "private.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "time/timer_wheel.hpp"

#include <eddy/time/detail/timer.hpp>
#include <eddy/tasks/detail/spin_lock.hpp>

namespace eddy::detail {

class Reactor;

/// Aligned to a cache line: one worker's queue must not share a line with another's (each is
/// its own allocation of about 3 KiB, so the end of one, earliest_ and size_, written at every
/// arm, could share a line with the lock of the next). `timeouts` with 2 workers ran at 0.77x
/// when a change elsewhere shifted the allocations; aligned, back at 1.0x.
class alignas(64) TimerQueue {
public:
    static constexpr std::int64_t kNone = TimerWheel::kNone;
    static constexpr std::size_t kPopBatch = 64;

    TimerQueue(Reactor& reactor, std::int64_t now_ns) noexcept : reactor_(reactor), wheel_(now_ns) {}
    TimerQueue(const TimerQueue&) = delete;
    TimerQueue& operator=(const TimerQueue&) = delete;

    bool arm(TimerEntry& e) noexcept;     // timer.hpp: arm_timer
    bool disarm(TimerEntry& e) noexcept;  // timer.hpp: disarm_timer
    void cancel(TimerEntry& e) noexcept;  // timer.hpp: cancel_timer

    /// The earliest deadline queued (kNone when empty). Seq_cst: see above.
    std::int64_t earliest() const noexcept { return earliest_.load(std::memory_order_seq_cst); }
    /// Timers queued now (a gauge for the metrics; relaxed).
    std::size_t size() const noexcept { return size_.load(std::memory_order_relaxed); }

    /// Reactor thread: takes every entry due at `now_ns` (marking it kFired) and calls
    /// f(entry) for each, under the lock: f copies what it needs (the entry's awaiter may
    /// go away once the lock is released, for kStop) and must not take the lock again.
    /// In rounds of kPopBatch, so that a worker arming a timer here never waits long behind
    /// a reactor firing thousands.
    template <class F>
    void pop_expired(std::int64_t now_ns, F&& f) {
        for (bool more = true; more;) {
            lock_.lock();
            const std::size_t n = wheel_.pop_expired(now_ns, kPopBatch, [&f](TimerEntry& e) {
                e.state = TimerEntry::State::kFired;
                f(e);
            });
            more = n == kPopBatch;
            size_.store(size_.load(std::memory_order_relaxed) - n, std::memory_order_relaxed);
            // Later, if anything changed: no wake-up needed, a relaxed store.
            earliest_.store(wheel_.next_wake(), std::memory_order_relaxed);
            lock_.unlock();
        }
    }

    /// Virtual time (io/reactor/virtual_time.cpp): recomputes earliest() from the queued entries, so
    /// that a timer disarmed since it was computed no longer counts.
    void refresh_earliest() noexcept {
        lock_.lock();
        earliest_.store(wheel_.next_wake(), std::memory_order_relaxed);  // the reactor's own read follows
        lock_.unlock();
    }

    /// Shutdown (every worker joined): forgets every queued entry, marking it kCancelled so
    /// that the destructors of their awaiters, run when the frames are destroyed, find
    /// nothing to unlink.
    void clear() noexcept;

private:
    Reactor& reactor_;
    SpinLock lock_;
    TimerWheel wheel_;  // guarded by lock_
    std::atomic<std::int64_t> earliest_{kNone};
    std::atomic<std::size_t> size_{0};  // written under lock_, read anywhere (relaxed)
};

}  // namespace eddy::detail
