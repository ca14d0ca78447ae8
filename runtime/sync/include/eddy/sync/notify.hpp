//! eddy/sync/notify.hpp: Notify, a wake-up signal between tasks without data (Tokio's
//! sync::Notify): one task waits, another tells it to go on.
//!
//!     eddy::Notify n;
//!     co_await n.notified();   // suspends until notified (or consumes a stored permit)
//!     n.notify_one();          // from any thread: wakes the first waiter, or stores a permit
//!     n.notify_waiters();      // from any thread: wakes every task waiting now
//!
//! Semantics:
//!   * notify_one() wakes the task that has waited longest. If no task waits, it stores a
//!     permit instead, and the next `co_await n.notified()` consumes it and returns without
//!     suspending. At most ONE permit is stored: notify_one() while a permit is stored does
//!     nothing, so notifications made while nobody waits collapse into one.
//!   * notify_waiters() wakes every task waiting at that moment and stores no permit (a task
//!     that starts waiting afterwards waits for the next notification). It does not consume
//!     a stored permit either.
//!   * A task waits from the moment its `co_await n.notified()` starts (unlike Tokio, merely
//!     creating the awaiter registers nothing).
//!   * Woken tasks are queued on a worker of the runtime they awaited from (the notifier's own
//!     worker when that is the same runtime), in the order they started waiting; none is
//!     resumed inline inside notify_one or notify_waiters.
//!
//! Who may call what: notify_one, notify_waiters and waiters from any thread, task or not;
//! `co_await n.notified()` only from a task on a runtime worker (eddy::WrongThread otherwise).
//! The Notify must outlive its waiters.
//!
//! Cancellation (eddy/tasks/cancellation.hpp): a wait cancelled while it waits resumes with
//! eddy::OperationCancelled and consumes nothing: a later notify_one goes to the next waiter or
//! becomes the permit. If notify_one or notify_waiters chose the waiter before the cancel took
//! effect, the wait returns normally (the grant wins: the notification is not lost). Awaiting
//! with a stopped token throws at once, even if a permit is stored (it stays stored). A
//! notify_one handed to a frame destroyed before it resumed (runtime shutdown), or a permit
//! it consumed, is passed on as if notify_one were called again.
//! @file
#pragma once

#include <cstddef>
#include <mutex>
#include <utility>

#include <eddy/tasks/detail/spin_lock.hpp>
#include <eddy/runtime/detail/wait_queue.hpp>

namespace eddy {

/// A wake-up signal between tasks, without data: one task waits in notified(), another
/// tells it to go on (see the file comment).
class Notify {
public:
    Notify() noexcept = default;
    Notify(const Notify&) = delete;
    Notify& operator=(const Notify&) = delete;

    /// What notified() returns; `co_await` it.
    class [[nodiscard]] Awaiter : public detail::WaitAwaiter<Awaiter> {
    public:
        static constexpr const char* kWhat = "co_await on eddy::Notify::notified()";
        static constexpr const char* kCancelled = "eddy::Notify::notified: the wait was cancelled";

        /// Made by notified().
        explicit Awaiter(Notify& n) noexcept : WaitAwaiter(n.waiters_), notify_(n) {}
        /// Movable until first awaited (WaitAwaiter asserts it): nothing was granted to `o`.
        Awaiter(Awaiter&& o) noexcept : WaitAwaiter(std::move(o)), notify_(o.notify_) {}
        /// A notify_one (or a permit) granted to a frame destroyed before it resumed goes on.
        ~Awaiter() {
            if (leave() && by_one_) notify_.notify_one();
        }
        /// Lock held: consumes the stored permit, if any.
        bool try_now(detail::WakeList&) noexcept {
            if (!notify_.permit_) return false;
            notify_.permit_ = false;
            by_one_ = true;
            return true;
        }
        void await_resume() { finish_wait(); }

    private:
        friend class Notify;
        Notify& notify_;
        bool by_one_ = false;  // granted by notify_one or a permit; set under the lock before the grant
    };

    /// `co_await n.notified()`: returns once this task is notified (or a permit was stored).
    Awaiter notified() noexcept { return Awaiter(*this); }

    /// Wakes the first waiter, or stores the permit (at most one) if nobody waits. Any thread.
    void notify_one() noexcept {
        detail::WakeList wakes;
        {
            std::lock_guard guard(lock_);
            if (auto* w = static_cast<Awaiter*>(waiters_.front())) {
                w->by_one_ = true;
                waiters_.grant_front(wakes);
            } else {
                permit_ = true;
            }
        }
        wakes.wake_all();
    }

    /// Wakes every task waiting now; stores no permit. Any thread.
    void notify_waiters() noexcept {
        detail::WakeList wakes;
        {
            std::lock_guard guard(lock_);
            waiters_.grant_all(wakes);
        }
        wakes.wake_all();
    }

    /// The tasks waiting (a snapshot, for tests and diagnostics).
    std::size_t waiters() const noexcept {
        std::lock_guard guard(lock_);
        return waiters_.size();
    }

private:
    mutable detail::SpinLock lock_;
    bool permit_ = false;  // guarded by lock_
    detail::WaitQueue waiters_{lock_};
};

}  // namespace eddy
