// io/timer_queue.hpp: one worker's pending timers, an intrusive pairing heap on the deadline
// under a spin lock. See eddy/io/detail/timer.hpp for the entry's protocol.
//
// # Why a pairing heap per worker
// The common timer is armed and disarmed before it fires (a per-read deadline, a sleep that
// loses a when_any). A pairing heap inserts in O(1) (one comparison with the root) and
// unlinks a node that never became the root in O(1) too (a fresh node has no children);
// only taking the root costs a merge of its children, O(log n) amortized. Deadlines stay
// exact (a wheel would round them to its tick). Per worker, so the lock is the arming
// worker's own unless a timer is disarmed or cancelled elsewhere, or the reactor fires.
//
// # The earliest deadline and the reactor's sleep
// earliest_ is the root's deadline (INT64_MAX when empty), stored under the lock whenever
// the root changes. The reactor sleeps until the smallest earliest_ of all queues. An arm
// that makes its entry the root publishes the new deadline (seq_cst), then reads how long
// the reactor means to sleep (Reactor::wake_at_, seq_cst) and wakes it if that is too long;
// the reactor publishes wake_at_ (seq_cst), then reads every earliest_ once more. So either
// the reactor sees the new deadline or the arming worker sees that it must wake it (a
// store-buffering pair on seq_cst operations). A root that goes away only makes the
// reactor wake early, which it handles by looking again.
#pragma once

#include "runtime/private.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>

#include <eddy/io/detail/timer.hpp>
#include <eddy/runtime/detail/spin_lock.hpp>

namespace eddy::detail {

class Reactor;

class TimerQueue {
public:
    static constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();

    explicit TimerQueue(Reactor& reactor) noexcept : reactor_(reactor) {}
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
    template <class F>
    void pop_expired(std::int64_t now_ns, F&& f) {
        lock_.lock();
        while (root_ != nullptr && root_->deadline_ns <= now_ns) {
            TimerEntry* e = root_;
            remove(e);
            e->state = TimerEntry::State::kFired;
            size_.store(size_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
            f(*e);
        }
        publish_earliest(std::memory_order_relaxed);  // later, if anything: no wake needed
        lock_.unlock();
    }

    /// Shutdown (every worker joined): forgets every queued entry, marking it kCancelled so
    /// that the destructors of their awaiters, run when the frames are destroyed, find
    /// nothing to unlink.
    void clear() noexcept;

private:
    void insert(TimerEntry* e) noexcept;
    void remove(TimerEntry* e) noexcept;
    static TimerEntry* meld(TimerEntry* a, TimerEntry* b) noexcept;
    static TimerEntry* merge_pairs(TimerEntry* first) noexcept;
    void publish_earliest(std::memory_order order) noexcept {
        earliest_.store(root_ != nullptr ? root_->deadline_ns : kNone, order);
    }

    Reactor& reactor_;
    SpinLock lock_;
    TimerEntry* root_ = nullptr;  // guarded by lock_
    std::atomic<std::int64_t> earliest_{kNone};
    std::atomic<std::size_t> size_{0};  // written under lock_, read anywhere (relaxed)
};

} // namespace eddy::detail
