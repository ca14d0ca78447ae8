// eddy/time/detail/timer.hpp: a timer as the awaiters see it (sleep, with_timeout). Not for
// users: no stability promise.
//
// # Where timers live
// Each worker has a timer queue of its own (io/time/timer_queue.hpp: a timing wheel in front of a
// heap, io/time/timer_wheel.hpp, under a spin lock, owned by the reactor). A timer is armed on the queue of the worker
// that arms it: taking that worker's lock is uncontended in the common case, and a timer
// that is disarmed before it fires (a sleep cancelled by when_any, a per-read with_timeout
// that did not expire) costs an insert and an unlink there, with no trip to the reactor.
// The reactor thread waits for the earliest deadline of all queues (one kernel timeout, no
// SQE per timer) and fires what is due: it resumes a sleeping task, or requests a stop for a
// with_timeout. Deadlines are exact: nothing fires before its deadline.
//
// # An entry's state (guarded by its queue's lock)
//   kIdle --arm--> kQueued --the reactor fires it--> kFired
//                          --disarm / a stop callback--> kIdle / kCancelled
//   kIdle --a stop callback before arming--> kCancelled (arming then fails: do not suspend)
// Whoever moves an entry out of kQueued owns what follows: the reactor resumes the sleeper
// or stops the source; the canceller resumes the sleeper with ECANCELED; a disarm means the
// timer will never fire. The entry lives in the awaiter, inside the awaiting frame.
#pragma once

#include <coroutine>
#include <cstdint>

namespace eddy::detail {

class TimerQueue;
struct TimeoutScope;  // eddy/time/with_timeout.hpp

struct TimerEntry {
    enum class State : std::uint8_t { kIdle, kQueued, kFired, kCancelled };
    /// What firing does: resume `waiter` (a sleep), or request a stop on `timeout`'s state
    /// (with_timeout: a reference to it is taken under the queue's lock, since the awaiter
    /// may be gone as soon as the lock is released; fire_timeout does the rest).
    enum class Action : std::uint8_t { kResume, kStop };

    std::int64_t deadline_ns = 0;  // std::chrono::steady_clock, since its epoch
    TimerQueue* queue = nullptr;   // set before arming; where it is (or was) queued
    std::coroutine_handle<> waiter{};
    TimeoutScope* timeout = nullptr;
    std::int32_t result = 0;  // kResume: 0 when it fired, -ECANCELED when cancelled
    State state = State::kIdle;
    Action action = Action::kResume;
    // Where it is queued (guarded by the queue's lock; io/time/timer_wheel.hpp): a wheel level and
    // slot, or the heap of due timers; and the links of the slot's list or of the heap.
    std::uint8_t level = 0;
    std::uint8_t slot = 0;
    TimerEntry* child = nullptr;
    TimerEntry* next = nullptr;
    TimerEntry* prev = nullptr;
};

/// The calling worker's timer queue; eddy::WrongThread naming `what` off a worker.
TimerQueue& current_timer_queue(const char* what);
/// Queues `e` on e.queue (set it first). False when a stop callback cancelled it before
/// (then e.result is -ECANCELED and nothing is queued). After a true return another thread
/// may fire `e` at any time: a kResume awaiter must touch nothing of its frame afterwards.
bool arm_timer(TimerEntry& e) noexcept;
/// Any thread: takes `e` off its queue if it is still there. True: it will never fire.
/// False: it fired already (or was never armed, or was cancelled).
bool disarm_timer(TimerEntry& e) noexcept;
/// Any thread, from a stop callback of a kResume entry: cancels it (see above).
void cancel_timer(TimerEntry& e) noexcept;

/// A kStop entry that fired, under its queue's lock: keeps its scope alive for fire_timeout.
void retain_timeout(TimeoutScope* s) noexcept;
/// After the lock is released: stops the scope (the with_timeout's task is cancelled) and
/// drops the reference retain_timeout took.
void fire_timeout(TimeoutScope* s) noexcept;

/// A stop callback that cancels a sleep.
struct CancelTimer {
    TimerEntry* entry;
    void operator()() const noexcept { cancel_timer(*entry); }
};

}  // namespace eddy::detail
