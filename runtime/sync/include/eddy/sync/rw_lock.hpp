//! eddy/sync/rw_lock.hpp: RwLock, an asynchronous reader-writer lock (any number of readers
//! or one writer) whose waiters suspend instead of blocking their worker, and its RAII guards
//! RwLock::ReadGuard and RwLock::WriteGuard.
//!
//!     eddy::RwLock l;
//!     {
//!         eddy::RwLock::ReadGuard r = co_await l.read();    // shared with other readers
//!         ... co_await anything ...                        // may suspend while holding it
//!     }                                                    // released here (or r.unlock())
//!     {
//!         eddy::RwLock::WriteGuard w = co_await l.write();  // exclusive
//!     }
//!     if (auto r = l.try_read()) { ... }                   // never suspends (also try_write)
//!
//! Order: one FIFO line of readers and writers. A task gets the lock at once only if it is
//! free for it (no writer holds it; for a writer, no reader either) and nobody waits; else it
//! queues at the back. So once a writer waits, readers that come later queue behind it even
//! while other readers hold the lock: writers are never starved by a stream of readers, and
//! writers get the lock in the order they asked. Readers are not starved either: they are
//! served in their turn. When the head of the line can go, the lock is handed over directly
//! (nobody barges in between): a writer gets it alone; a reader gets it together with every
//! reader queued consecutively behind it, up to the next waiting writer, all woken at once.
//! Woken tasks are queued on a worker of the runtime they awaited from (the releaser's own
//! worker when that is the same runtime), never resumed inline inside an unlock.
//!
//! Who may call what: `co_await l.read()` and `co_await l.write()` only from a task on a
//! runtime worker (eddy::WrongThread otherwise); try_read, try_write, the snapshots and
//! unlocking (a guard's destruction or unlock()) from any thread. Ownership belongs to the
//! guard, not to a thread: a guard may be moved to and released by another task. A task
//! that holds a read guard and asks for write() waits for itself forever (no upgrades), as
//! with std::shared_mutex; one that asks for read() again may too (if a writer queued in
//! between, the second read waits behind it, and the writer for the first read: take one
//! guard and pass it down instead). The RwLock must outlive its guards and waiters.
//!
//! Cancellation (eddy/tasks/cancellation.hpp): a task cancelled while waiting leaves the line
//! and resumes with eddy::OperationCancelled, and what it was holding up goes on (a cancelled
//! writer at the head lets the readers behind it in, if no writer holds the lock); if the lock
//! was handed to it first, it resumes with the guard instead (the lock is not lost). Awaiting
//! with a stopped token throws at once, even if the lock is free. A frame destroyed while
//! waiting (runtime shutdown) leaves the line; one destroyed after the handover but before it
//! resumed releases what it was handed.
//! @file
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <utility>

#include <eddy/tasks/detail/spin_lock.hpp>
#include <eddy/runtime/detail/wait_queue.hpp>

namespace eddy {

/// An asynchronous reader-writer lock: any number of readers or one writer; waiters
/// suspend instead of blocking their worker (see the file comment).
class RwLock {
    /// Ownership of one kind (read: shared; write: exclusive); releases it when destroyed.
    template <bool Write>
    class [[nodiscard]] Guard {
    public:
        Guard(Guard&& o) noexcept : lock_(std::exchange(o.lock_, nullptr)) {}
        Guard& operator=(Guard&& o) noexcept {
            if (this != &o) {
                unlock();
                lock_ = std::exchange(o.lock_, nullptr);
            }
            return *this;
        }
        Guard(const Guard&) = delete;
        Guard& operator=(const Guard&) = delete;
        ~Guard() { unlock(); }

        /// Releases early (handing the lock on, if that lets the head of the line in).
        /// Idempotent.
        void unlock() noexcept {
            if (RwLock* l = std::exchange(lock_, nullptr)) l->release(Write);
        }
        /// True while this guard holds its lock.
        bool owns_lock() const noexcept { return lock_ != nullptr; }
        explicit operator bool() const noexcept { return owns_lock(); }

    private:
        friend class RwLock;
        explicit Guard(RwLock& l) noexcept : lock_(&l) {}
        RwLock* lock_;
    };

public:
    /// Shared ownership (one of any number of readers). Move-only.
    using ReadGuard = Guard<false>;
    /// Exclusive ownership. Move-only.
    using WriteGuard = Guard<true>;

    RwLock() noexcept = default;
    RwLock(const RwLock&) = delete;
    RwLock& operator=(const RwLock&) = delete;

    template <bool Write>
    /// What read() and write() return; `co_await` it for the guard.
    class [[nodiscard]] LockAwaiter : public detail::WaitAwaiter<LockAwaiter<Write>> {
    public:
        static constexpr const char* kWhat =
            Write ? "co_await on eddy::RwLock::write()" : "co_await on eddy::RwLock::read()";
        static constexpr const char* kCancelled =
            Write ? "eddy::RwLock::write: the wait was cancelled" : "eddy::RwLock::read: the wait was cancelled";

        /// Made by read() or write().
        explicit LockAwaiter(RwLock& l) noexcept
            : detail::WaitAwaiter<LockAwaiter>(Write ? l.writers_waiting_ : l.readers_waiting_), lock_(l) {}
        /// Movable until first awaited (WaitAwaiter asserts it): `o` holds no ticket, no grant.
        LockAwaiter(LockAwaiter&& o) noexcept : detail::WaitAwaiter<LockAwaiter>(std::move(o)), lock_(o.lock_) {}
        /// What was handed to a frame destroyed before it resumed (runtime shutdown) is
        /// released, so the lock is not left held by nobody.
        ~LockAwaiter() {
            if (this->leave()) lock_.release(Write);
        }
        /// Lock held: takes the lock if it is free for us and nobody waits; else draws our
        /// place in the line (we are queued right after, under the same lock).
        bool try_now(detail::WakeList&) noexcept {
            if (lock_.take_locked(Write)) return true;
            ticket_ = lock_.next_ticket_++;
            return false;
        }
        Guard<Write> await_resume() {
            this->finish_wait();
            return Guard<Write>(lock_);
        }

    private:
        friend class RwLock;
        RwLock& lock_;
        std::uint64_t ticket_ = 0;  // place in the line; written before queueing, read under the lock
    };
    using ReadAwaiter = LockAwaiter<false>;  ///< What read() returns.
    using WriteAwaiter = LockAwaiter<true>;  ///< What write() returns.

    /// `co_await l.read()`: a ReadGuard, once this task may read.
    ReadAwaiter read() noexcept { return ReadAwaiter(*this); }
    /// `co_await l.write()`: a WriteGuard, once this task holds the lock alone.
    WriteAwaiter write() noexcept { return WriteAwaiter(*this); }

    /// A ReadGuard if no writer holds the lock and nobody waits, else nullopt. Any thread.
    std::optional<ReadGuard> try_read() noexcept { return try_take<false>(); }
    /// A WriteGuard if the lock is free and nobody waits, else nullopt. Any thread.
    std::optional<WriteGuard> try_write() noexcept { return try_take<true>(); }

    // Snapshots, for tests and diagnostics.
    /// The readers holding the lock.
    std::size_t readers() const noexcept {
        std::lock_guard guard(lock_);
        return readers_;
    }
    /// True while a writer holds the lock.
    bool is_write_locked() const noexcept {
        std::lock_guard guard(lock_);
        return writer_;
    }
    /// The tasks waiting (readers and writers).
    std::size_t waiters() const noexcept {
        std::lock_guard guard(lock_);
        return readers_waiting_.size() + writers_waiting_.size();
    }

private:
    template <bool Write>
    std::optional<Guard<Write>> try_take() noexcept {
        std::lock_guard guard(lock_);
        if (!take_locked(Write)) return std::nullopt;
        return Guard<Write>(*this);
    }

    /// lock_ held: takes the lock if it is free for `write` and nobody waits (waiters first).
    bool take_locked(bool write) noexcept {
        if (writer_ || !readers_waiting_.empty() || !writers_waiting_.empty()) return false;
        if (write) {
            if (readers_ != 0) return false;
            writer_ = true;
        } else {
            ++readers_;
        }
        return true;
    }

    /// lock_ held: hands the lock to the head of the line while it can go: one writer, or the
    /// readers up to the next waiting writer.
    void grant_locked(detail::WakeList& wakes) noexcept {
        for (;;) {
            auto* r = static_cast<ReadAwaiter*>(readers_waiting_.front());
            auto* w = static_cast<WriteAwaiter*>(writers_waiting_.front());
            if (w != nullptr && (r == nullptr || w->ticket_ < r->ticket_)) {  // a writer is next
                if (writer_ || readers_ != 0) return;
                writer_ = true;
                writers_waiting_.grant_front(wakes);
                return;
            }
            if (r == nullptr || writer_) return;  // nobody waits, or the readers wait for a writer
            ++readers_;
            readers_waiting_.grant_front(wakes);
        }
    }

    /// A guard or an unhanded grant lets go.
    void release(bool write) noexcept {
        detail::WakeList wakes;
        {
            std::lock_guard guard(lock_);
            if (write) {
                writer_ = false;
            } else {
                --readers_;
            }
            grant_locked(wakes);
        }
        wakes.wake_all();
    }

    /// A queued waiter was cancelled: the head of the line may go now (a writer that was
    /// ahead of readers left).
    static void on_cancel(void* self, detail::WakeList& wakes) noexcept {
        static_cast<RwLock*>(self)->grant_locked(wakes);
    }

    mutable detail::SpinLock lock_;
    std::size_t readers_ = 0;        // readers holding the lock; guarded by lock_
    bool writer_ = false;            // a writer holds it; guarded by lock_
    std::uint64_t next_ticket_ = 0;  // the next place in the line; guarded by lock_
    // The line is split by kind; the tickets give the order across the two.
    detail::WaitQueue readers_waiting_{lock_, &RwLock::on_cancel, this};
    detail::WaitQueue writers_waiting_{lock_, &RwLock::on_cancel, this};
};

}  // namespace eddy
