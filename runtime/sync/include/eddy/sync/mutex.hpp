//! eddy/sync/mutex.hpp: Mutex, an asynchronous lock whose waiters suspend instead of
//! blocking their worker, and MutexGuard, the RAII ownership it hands out.
//!
//!     eddy::Mutex m;
//!     {
//!         eddy::MutexGuard g = co_await m.lock();   // suspends while another task holds it
//!         ... co_await anything ...                 // may suspend while holding it
//!     }                                             // unlocked here (or g.unlock() earlier)
//!     if (auto g = m.try_lock()) { ... }            // never suspends
//!
//! FIFO handoff: unlocking while tasks wait passes ownership directly to the first waiter (the
//! mutex stays locked in between), so waiters get the lock in the order they asked for it,
//! nobody barges in ahead of them and nobody starves. The new owner is queued on a worker of
//! the runtime it awaited from (the unlocker's own worker when that is the same runtime); it
//! is never resumed inline inside unlock.
//!
//! Who may call what: `co_await m.lock()` only from a task on a runtime worker
//! (eddy::WrongThread otherwise); try_lock() and unlocking (a guard's destruction or
//! unlock()) from any thread. Ownership belongs to the guard, not to a thread: a guard may be
//! moved to and released by another task. The Mutex must outlive its guards and waiters.
//!
//! Cancellation (eddy/tasks/cancellation.hpp): a task cancelled while waiting leaves the
//! queue and resumes with eddy::OperationCancelled, unless ownership was handed to it first
//! (then it resumes with the guard, and the lock is not lost); awaiting with a stopped token
//! throws at once, even if the mutex is free.
//! @file
#pragma once

#include <cstddef>
#include <mutex>
#include <optional>
#include <utility>

#include <eddy/tasks/detail/spin_lock.hpp>
#include <eddy/runtime/detail/wait_queue.hpp>

namespace eddy {

class Mutex;

/// Ownership of a locked Mutex; unlocks it when destroyed. Move-only.
class [[nodiscard]] MutexGuard {
public:
    /// Moves the ownership; `o` no longer owns the mutex.
    MutexGuard(MutexGuard&& o) noexcept : mutex_(std::exchange(o.mutex_, nullptr)) {}
    /// Unlocks the mutex this guard owned, then takes `o`'s ownership.
    MutexGuard& operator=(MutexGuard&& o) noexcept {
        if (this != &o) {
            unlock();
            mutex_ = std::exchange(o.mutex_, nullptr);
        }
        return *this;
    }
    MutexGuard(const MutexGuard&) = delete;
    MutexGuard& operator=(const MutexGuard&) = delete;
    ~MutexGuard() { unlock(); }

    /// Releases the lock early (handing it to the first waiter, if any). Idempotent.
    void unlock() noexcept;
    /// True while this guard owns its mutex.
    bool owns_lock() const noexcept { return mutex_ != nullptr; }
    /// owns_lock().
    explicit operator bool() const noexcept { return owns_lock(); }

private:
    friend class Mutex;
    explicit MutexGuard(Mutex& m) noexcept : mutex_(&m) {}
    Mutex* mutex_;
};

/// An asynchronous lock: a task waiting for it suspends instead of blocking its worker.
/// `co_await m.lock()` gives a MutexGuard (see the file comment).
class Mutex {
public:
    Mutex() noexcept = default;
    Mutex(const Mutex&) = delete;
    Mutex& operator=(const Mutex&) = delete;

    /// What lock() returns; `co_await` it for the MutexGuard.
    class [[nodiscard]] LockAwaiter : public detail::WaitAwaiter<LockAwaiter> {
    public:
        static constexpr const char* kWhat = "co_await on eddy::Mutex::lock()";
        static constexpr const char* kCancelled = "eddy::Mutex::lock: the wait was cancelled";

        /// Made by lock().
        explicit LockAwaiter(Mutex& m) noexcept : WaitAwaiter(m.waiters_), mutex_(m) {}
        /// Movable until first awaited (WaitAwaiter asserts it): nothing was granted to `o`.
        LockAwaiter(LockAwaiter&& o) noexcept : WaitAwaiter(std::move(o)), mutex_(o.mutex_) {}
        /// Ownership handed to a frame that is destroyed before it resumed (runtime shutdown)
        /// is passed on, so the mutex is not left locked by nobody.
        ~LockAwaiter() {
            if (leave()) mutex_.unlock();
        }
        /// Lock held: takes a free mutex, unless others wait (they come first).
        bool try_now(detail::WakeList&) noexcept { return mutex_.take_locked(); }
        MutexGuard await_resume() {
            finish_wait();
            return MutexGuard(mutex_);
        }

    private:
        Mutex& mutex_;
    };

    /// `co_await m.lock()`: the guard, once the mutex is this task's.
    LockAwaiter lock() noexcept { return LockAwaiter(*this); }

    /// The guard if the mutex is free and nobody waits for it, else nullopt. Any thread.
    std::optional<MutexGuard> try_lock() noexcept {
        std::lock_guard guard(lock_);
        if (!take_locked()) return std::nullopt;
        return MutexGuard(*this);
    }

    /// True while some guard owns the mutex (a snapshot, for tests and diagnostics).
    bool is_locked() const noexcept {
        std::lock_guard guard(lock_);
        return locked_;
    }
    /// The tasks waiting for it (a snapshot, for tests and diagnostics).
    std::size_t waiters() const noexcept {
        std::lock_guard guard(lock_);
        return waiters_.size();
    }

private:
    friend class MutexGuard;

    /// lock_ held.
    bool take_locked() noexcept {
        if (locked_) return false;  // free with waiters cannot happen: unlock hands over
        locked_ = true;
        return true;
    }

    void unlock() noexcept {
        detail::WakeList wakes;
        {
            std::lock_guard guard(lock_);
            // Handoff: the first waiter owns the mutex now; locked_ stays true.
            if (waiters_.grant_front(wakes) == nullptr) locked_ = false;
        }
        wakes.wake_all();
    }

    mutable detail::SpinLock lock_;
    bool locked_ = false;  // guarded by lock_
    detail::WaitQueue waiters_{lock_};
};

inline void MutexGuard::unlock() noexcept {
    if (Mutex* m = std::exchange(mutex_, nullptr)) m->unlock();
}

}  // namespace eddy
