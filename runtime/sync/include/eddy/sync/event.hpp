//! eddy/sync/event.hpp: Event, a flag that is set once and wakes every task awaiting it.
//!
//!     eddy::Event ready;
//!     ... co_await ready;       // in any number of tasks: suspends until set (or returns)
//!     ... ready.set();         // from any thread, task or not; later sets do nothing
//!
//! Waking never resumes a waiter inline inside set(): each waiter is queued on a worker of
//! the runtime it awaited from (the setter's own worker when that is the same runtime), in
//! the order they started waiting. The Event must outlive its waiters.
//!
//! Who may call what: set() and is_set() from any thread; `co_await event` only from a task
//! on a runtime worker (eddy::WrongThread otherwise).
//!
//! Cancellation (eddy/tasks/cancellation.hpp): a waiting task whose cancellation is requested
//! resumes with eddy::OperationCancelled, unless set() queued it first (then it resumes
//! normally); awaiting with a stopped token throws at once, even if the event is set.
//! @file
#pragma once

#include <atomic>
#include <mutex>

#include <eddy/tasks/detail/spin_lock.hpp>
#include <eddy/runtime/detail/wait_queue.hpp>

namespace eddy {

/// A flag that is set once and wakes every task awaiting it (see the file comment).
class Event {
public:
    Event() noexcept = default;
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;

    /// True once set() was called. Any thread.
    bool is_set() const noexcept {
        // Acquire: pairs with the release store in set(), so what the setter did is visible.
        return set_.load(std::memory_order_acquire);
    }

    /// Sets the event and queues every waiter. Idempotent.
    void set() noexcept {
        detail::WakeList wakes;
        {
            std::lock_guard guard(lock_);
            if (set_.load(std::memory_order_relaxed)) return;  // the lock orders every store
            set_.store(true, std::memory_order_release);       // release: pairs with is_set()
            waiters_.grant_all(wakes);
        }
        wakes.wake_all();
    }

    /// What `co_await event` awaits.
    class [[nodiscard]] Awaiter : public detail::WaitAwaiter<Awaiter> {
    public:
        static constexpr const char* kWhat = "co_await on an eddy::Event";
        static constexpr const char* kCancelled = "eddy::Event: the wait was cancelled";

        /// Made by operator co_await.
        explicit Awaiter(Event& e) noexcept : WaitAwaiter(e.waiters_) {}
        /// Lock held. The event is the queue's owner (no pointer of our own: a waiting task's
        /// frame holds this awaiter, and every byte counts a million times).
        bool try_now(detail::WakeList&) const noexcept {
            return static_cast<const Event*>(this->queue().owner())->set_.load(std::memory_order_relaxed);
        }
        void await_resume() { finish_wait(); }
    };
    /// `co_await event`: returns once the event is set (at once if it is).
    Awaiter operator co_await() noexcept { return Awaiter(*this); }
    /// The same wait as an operation of its own, which moves until awaited: what a combinator
    /// takes over (`co_await eddy::with_timeout(event.wait(), 1s)`), as for Latch::wait().
    Awaiter wait() noexcept { return Awaiter(*this); }

private:
    detail::SpinLock lock_;
    std::atomic<bool> set_{false};  // written under lock_; read without it by is_set()
    detail::WaitQueue waiters_{lock_, nullptr, this};
};

}  // namespace eddy
