//! eddy/sync/semaphore.hpp: Semaphore, a counter of permits that tasks acquire
//! asynchronously (suspending while too few are available) and give back with release().
//!
//!     eddy::Semaphore slots(4);          // at most 4 tasks inside at once
//!     co_await slots.acquire();          // suspends until a permit is free
//!     ... work ...
//!     slots.release();                   // from any thread
//!     if (slots.try_acquire(2)) { ... }  // never suspends
//!
//! FIFO: waiters are served in the order they asked. A waiter at the head that needs more
//! permits than are available blocks the ones behind it, even if they need fewer (so a large
//! request is never starved by a stream of small ones), and try_acquire fails while anyone
//! waits. A granted waiter is queued on a worker of the runtime it awaited from (the
//! releaser's own worker when that is the same runtime); it is never resumed inline inside
//! release.
//!
//! Permits are not owned: release() may be called by anyone, any number of times (the count
//! may grow past the initial value). acquire(0) and try_acquire(0) succeed at once.
//!
//! Who may call what: `co_await s.acquire(n)` only from a task on a runtime worker
//! (eddy::WrongThread otherwise); try_acquire, release and available from any thread. The
//! Semaphore must outlive its waiters.
//!
//! Cancellation (eddy/tasks/cancellation.hpp): a task cancelled while waiting leaves the
//! queue with no permit and resumes with eddy::OperationCancelled, and the permits it was
//! holding up pass to the waiters behind it; a waiter granted before the cancel took effect
//! keeps its permits and resumes normally (release them as usual). Awaiting with a stopped
//! token throws at once, even if permits are free.
//! @file
#pragma once

#include <cstddef>
#include <mutex>
#include <utility>

#include <eddy/tasks/detail/spin_lock.hpp>
#include <eddy/runtime/detail/wait_queue.hpp>

namespace eddy {

/// A counter of permits that tasks acquire asynchronously and give back with release()
/// (see the file comment).
class Semaphore {
public:
    /// Starts with `permits` permits.
    explicit Semaphore(std::size_t permits) noexcept : permits_(permits) {}
    Semaphore(const Semaphore&) = delete;
    Semaphore& operator=(const Semaphore&) = delete;

    /// What acquire() returns; `co_await` it.
    class [[nodiscard]] AcquireAwaiter : public detail::WaitAwaiter<AcquireAwaiter> {
    public:
        static constexpr const char* kWhat = "co_await on eddy::Semaphore::acquire()";
        static constexpr const char* kCancelled = "eddy::Semaphore::acquire: the wait was cancelled";

        /// Made by acquire(n).
        AcquireAwaiter(Semaphore& s, std::size_t n) noexcept : WaitAwaiter(s.waiters_), sem_(s), n_(n) {}
        /// Movable until first awaited (WaitAwaiter asserts it): nothing was granted to `o`.
        AcquireAwaiter(AcquireAwaiter&& o) noexcept : WaitAwaiter(std::move(o)), sem_(o.sem_), n_(o.n_) {}
        /// Permits granted to a frame that is destroyed before it resumed (runtime shutdown)
        /// go back, so none is lost.
        ~AcquireAwaiter() {
            if (leave()) sem_.release(n_);
        }
        /// Lock held.
        bool try_now(detail::WakeList&) noexcept { return sem_.take_locked(n_); }
        void await_resume() { finish_wait(); }

    private:
        friend class Semaphore;
        Semaphore& sem_;
        std::size_t n_;
    };

    /// `co_await s.acquire(n)`: returns once `n` permits are this task's.
    AcquireAwaiter acquire(std::size_t n = 1) noexcept { return AcquireAwaiter(*this, n); }

    /// Takes `n` permits if that many are free and nobody waits; never suspends. Any thread.
    bool try_acquire(std::size_t n = 1) noexcept {
        std::lock_guard guard(lock_);
        return take_locked(n);
    }

    /// Adds `n` permits and grants the waiters they satisfy, in order. Any thread.
    void release(std::size_t n = 1) noexcept {
        detail::WakeList wakes;
        {
            std::lock_guard guard(lock_);
            permits_ += n;
            grant_locked(wakes);
        }
        wakes.wake_all();
    }

    /// The free permits (a snapshot).
    std::size_t available() const noexcept {
        std::lock_guard guard(lock_);
        return permits_;
    }

private:
    /// lock_ held. Waiters come first (FIFO), so a free permit is only taken when none wait.
    bool take_locked(std::size_t n) noexcept {
        if (n == 0) return true;  // nothing to wait for, even behind other waiters
        if (!waiters_.empty() || permits_ < n) return false;
        permits_ -= n;
        return true;
    }

    /// lock_ held: grants the head waiters while the permits cover them.
    void grant_locked(detail::WakeList& wakes) noexcept {
        while (auto* head = static_cast<AcquireAwaiter*>(waiters_.front())) {
            if (head->n_ > permits_) break;  // the head blocks those behind it
            permits_ -= head->n_;
            waiters_.grant_front(wakes);
        }
    }

    /// A queued waiter was cancelled: the permits it was holding up go to those behind it.
    static void on_cancel(void* self, detail::WakeList& wakes) noexcept {
        static_cast<Semaphore*>(self)->grant_locked(wakes);
    }

    mutable detail::SpinLock lock_;
    std::size_t permits_;  // guarded by lock_
    detail::WaitQueue waiters_{lock_, &Semaphore::on_cancel, this};
};

}  // namespace eddy
