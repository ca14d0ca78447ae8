//! eddy/sync/watch.hpp: watch::channel<T>, a single value that one Sender keeps replacing
//! and any number of Receivers observe: each learns that it changed and reads the latest one
//! (Tokio's watch).
//!
//!     auto [tx, rx] = eddy::watch::channel<Config>(initial);
//!     tx.send(next);                              // any thread: replaces the value, never suspends
//!     co_await rx.changed();                      // suspends until a value newer than rx has seen
//!     { auto cfg = rx.borrow(); use(*cfg); }      // read the latest value (a read lock: see below)
//!     eddy::watch::Receiver<Config> rx2 = rx;     // copies track their own "seen" version
//!
//! Semantics:
//!   * The channel holds one value and a version. The value given to channel() is version 0;
//!     every send, send_replace, send_modify (and send_if_modified whose function returns
//!     true) stores the new value, bumps the version and wakes every task waiting in
//!     changed(). Intermediate values may be skipped: a receiver sees the latest value, not
//!     every value (use eddy::broadcast for every value).
//!   * Each Receiver remembers the last version it has seen. A Receiver made by channel() or
//!     Sender::subscribe() has seen the value current at that moment; a copy has seen what its
//!     original had seen. `co_await rx.changed()` returns at once if a newer version exists,
//!     else waits for one; either way it marks that version seen. has_changed() asks without
//!     waiting or marking; borrow_and_update() reads and marks.
//!   * When the Sender is dropped (destroyed or moved-onto), the channel is closed: a
//!     changed() that finds no version newer than its receiver's throws eddy::ChannelClosed,
//!     and so do the changed() waiting at that moment. A newer value sent before the drop is
//!     still reported once (changed() returns normally), then ChannelClosed. The last value
//!     stays readable through borrow() for as long as any end lives.
//!   * send never fails for want of receivers (unlike Tokio's send, it does not return the
//!     value): the value is stored and a later subscribe() reads it. receiver_count() and
//!     is_closed() tell whether anyone is listening.
//!   * A woken task is queued on a worker of the runtime it awaited from (the sender's own
//!     worker when that is the same runtime), never resumed inline inside send.
//!
//! Reading: borrow() returns a watch::Ref, a guard holding a shared (read) lock on the value:
//! no copy is made, however large T is, and a reader never sees a torn value, because
//! senders replace the value under the exclusive lock. (A copy per borrow would cost every
//! reader a T copy, or every send an allocation for a shared snapshot; Tokio makes the same
//! choice.) Consequences:
//!   * A send (on any thread, a worker included) BLOCKS its thread, without suspending, until
//!     every Ref has been released; borrows that start while a send waits wait behind it
//!     (the lock prefers writers, so a stream of readers cannot starve the sender).
//!   * So: keep a Ref for the duration of a read and copy out what you need; NEVER hold a Ref
//!     across a co_await (the task that must send may be queued behind yours on the same
//!     worker: a deadlock); on a thread that holds a Ref, do not borrow the same channel
//!     again (a send waiting in between blocks the second borrow: a deadlock) and do not
//!     send on it.
//!   * A Ref must not outlive the end (Sender or Receiver) it was borrowed from.
//!
//! Who may call what: the Sender's send, send_replace, send_modify, send_if_modified, borrow,
//! subscribe, receiver_count and is_closed, and the Receiver's borrow, borrow_and_update and
//! has_changed, from any thread; `co_await rx.changed()` only from a task on a runtime
//! worker (eddy::WrongThread otherwise). A Receiver is used by one task at a time (its seen
//! version is not synchronized): give each task its own copy. Either end may be dropped
//! first, on any thread; the state is freed with the last one. Using a moved-from end
//! throws eddy::ChannelClosed.
//!
//! Cancellation (eddy/tasks/cancellation.hpp): a changed() cancelled while waiting resumes
//! with eddy::OperationCancelled and marks nothing seen: the next changed() reports the value
//! it would have reported. If a new value (or the close) arrived before the cancel took
//! effect, it returns (or throws ChannelClosed) instead. Awaiting with a stopped token throws
//! at once, even if a newer value is there.
//! @file
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <system_error>
#include <utility>

#include <eddy/sync/detail/channel_end.hpp>
#include <eddy/tasks/detail/spin_lock.hpp>
#include <eddy/runtime/detail/wait_queue.hpp>
#include <eddy/tasks/errors.hpp>

namespace eddy::watch {

template <class T>
class Sender;
template <class T>
class Receiver;

namespace detail {

/// The value's read-write lock: glibc's rwlock of kind PREFER_WRITER_NONRECURSIVE, so that a
/// waiting send blocks new readers (std::shared_mutex, a default pthread rwlock, prefers
/// readers: a steady stream of borrows would starve the sender). Readers are therefore not
/// recursive (see the file comment).
class ValueLock {
public:
    ValueLock() {
        pthread_rwlockattr_t attr;
        pthread_rwlockattr_init(&attr);
        pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
        const int rc = pthread_rwlock_init(&lock_, &attr);
        pthread_rwlockattr_destroy(&attr);
        check(rc, "init");
    }
    ValueLock(const ValueLock&) = delete;
    ValueLock& operator=(const ValueLock&) = delete;
    ~ValueLock() { pthread_rwlock_destroy(&lock_); }

    void lock() { check(pthread_rwlock_wrlock(&lock_), "send"); }
    void unlock() noexcept { pthread_rwlock_unlock(&lock_); }
    void lock_shared() { check(pthread_rwlock_rdlock(&lock_), "borrow"); }
    void unlock_shared() noexcept { pthread_rwlock_unlock(&lock_); }

private:
    /// EDEADLK (a send from inside send_modify's function), EAGAIN (too many readers), ENOMEM.
    static void check(int rc, const char* what) {
        if (rc != 0) throw std::system_error(rc, std::generic_category(), std::string("eddy::watch: ") + what);
    }
    pthread_rwlock_t lock_;
};

/// What the ends share. Freed by whichever end drops the last reference.
template <class T>
struct State {
    explicit State(T initial) : value(std::move(initial)) {}

    // Shared by Refs, exclusive for a send: readers see whole values only.
    ValueLock value_lock;
    T value;  // guarded by value_lock
    // Stored with value_lock held exclusively AND under lock, so either lock orders a read
    // made under it (relaxed); has_changed() reads it with neither: acquire, pairing with
    // the release store in Sender::publish.
    std::atomic<std::uint64_t> version{0};

    eddy::detail::SpinLock lock;
    bool sender_alive = true;   // guarded by lock
    std::size_t receivers = 1;  // guarded by lock
    eddy::detail::WaitQueue waiters{lock};

    /// lock held: true when no end is left (the caller deletes the state after unlocking).
    bool unused_locked() const noexcept { return !sender_alive && receivers == 0; }
};

}  // namespace detail

/// A read guard on the channel's value: a shared lock, released when the Ref is destroyed.
/// Never hold one across a co_await (see the file comment). Move-only.
template <class T>
class [[nodiscard]] Ref {
public:
    /// The value, valid while the Ref lives.
    /// @{
    const T& operator*() const noexcept { return *value_; }
    const T* operator->() const noexcept { return value_; }
    const T& get() const noexcept { return *value_; }
    /// @}
    /// True if this value was newer than what the receiver had seen when it borrowed
    /// (always false for a Sender's borrow).
    bool has_changed() const noexcept { return changed_; }

private:
    friend class Sender<T>;
    friend class Receiver<T>;
    Ref(std::shared_lock<detail::ValueLock> lock, const T& value, bool changed) noexcept
        : lock_(std::move(lock)), value_(&value), changed_(changed) {}

    std::shared_lock<detail::ValueLock> lock_;
    const T* value_;
    bool changed_;
};

/// Copyable: a copy is one more receiver, which has seen what the original had seen.
template <class T>
class Receiver {
public:
    /// What changed() returns; `co_await` it.
    class [[nodiscard]] ChangedAwaiter : public eddy::detail::WaitAwaiter<ChangedAwaiter> {
    public:
        static constexpr const char* kWhat = "co_await on eddy::watch::Receiver::changed()";
        static constexpr const char* kCancelled = "eddy::watch::Receiver::changed: the wait was cancelled";

        /// Made by changed().
        ChangedAwaiter(detail::State<T>& s, std::uint64_t& seen) noexcept
            : eddy::detail::WaitAwaiter<ChangedAwaiter>(s.waiters), state_(s), seen_(seen) {}
        /// Movable until first awaited (WaitAwaiter asserts it): nothing was observed yet.
        ChangedAwaiter(ChangedAwaiter&& o) noexcept
            : eddy::detail::WaitAwaiter<ChangedAwaiter>(std::move(o)), state_(o.state_), seen_(o.seen_) {}
        ChangedAwaiter(const ChangedAwaiter&) = delete;
        ChangedAwaiter& operator=(const ChangedAwaiter&) = delete;

        /// Lock held: a newer version, or the close, ends the wait.
        bool try_now(eddy::detail::WakeList&) noexcept {
            const std::uint64_t v = state_.version.load(std::memory_order_relaxed);  // the lock orders it
            if (v != seen_) {
                observed_ = v;
                return true;
            }
            closed_ = !state_.sender_alive;
            return closed_;
        }
        void await_resume() {
            this->finish_wait();
            if (closed_) throw ChannelClosed("eddy::watch::Receiver::changed: the sender was dropped");
            seen_ = observed_;
        }

    private:
        friend class Sender<T>;
        detail::State<T>& state_;
        std::uint64_t& seen_;         // the receiver's; written by await_resume only
        std::uint64_t observed_ = 0;  // the newer version; set under the lock, before the grant
        bool closed_ = false;         // set under the lock, before the grant
    };

    /// `co_await rx.changed()`: returns once a version newer than this receiver's last seen
    /// one exists, and marks it seen. Throws eddy::ChannelClosed if the sender is gone and
    /// there is none (also on a moved-from receiver).
    ChangedAwaiter changed() { return ChangedAwaiter(state_.get("eddy::watch::Receiver::changed"), seen_); }

    /// The latest value, under a read lock (see Ref). Does not mark it seen.
    Ref<T> borrow() const {
        detail::State<T>& s = state_.get("eddy::watch::Receiver::borrow");
        std::shared_lock lock(s.value_lock);
        const bool changed = s.version.load(std::memory_order_relaxed) != seen_;  // value_lock orders it
        return Ref<T>(std::move(lock), s.value, changed);
    }

    /// The latest value, under a read lock, marking its version seen.
    Ref<T> borrow_and_update() {
        detail::State<T>& s = state_.get("eddy::watch::Receiver::borrow_and_update");
        std::shared_lock lock(s.value_lock);
        const std::uint64_t v = s.version.load(std::memory_order_relaxed);  // value_lock orders it
        const bool changed = v != seen_;
        seen_ = v;
        return Ref<T>(std::move(lock), s.value, changed);
    }

    /// True if a version newer than this receiver's last seen one exists (a snapshot). Does
    /// not mark it seen; does not tell whether the sender is gone (changed() does).
    bool has_changed() const {
        // Acquire: pairs with the release store in Sender::publish.
        return state_.get("eddy::watch::Receiver::has_changed").version.load(std::memory_order_acquire) != seen_;
    }

private:
    friend class Sender<T>;
    template <class U>
    friend std::pair<Sender<U>, Receiver<U>> channel(U initial);
    Receiver(detail::State<T>* s, std::uint64_t seen) noexcept : state_(s), seen_(seen) {}

    eddy::detail::EndRef<detail::State<T>, eddy::detail::CountedReceiver> state_;
    std::uint64_t seen_;  // the last version this receiver has seen; its task's alone
};

/// Move-only. Dropping it (destroying it, or assigning onto it) closes the channel: waiting
/// changed() calls throw eddy::ChannelClosed.
template <class T>
class Sender {
public:
    /// Moves the end; `other` is left empty (using it throws eddy::ChannelClosed).
    Sender(Sender&&) noexcept = default;
    /// Drops this end first (closing the channel if it was the sender), then takes the other's.
    Sender& operator=(Sender&&) noexcept = default;
    Sender(const Sender&) = delete;
    Sender& operator=(const Sender&) = delete;

    /// Replaces the value and wakes every waiting changed(). Never suspends; blocks while a
    /// Ref is held (see the file comment).
    void send(T value) {
        send_if_modified([&](T& current) {
            current = std::move(value);
            return true;
        });
    }

    /// send(), returning the value it replaced.
    T send_replace(T value) {
        send_if_modified([&](T& current) {
            using std::swap;
            swap(current, value);
            return true;
        });
        return value;
    }

    /// Calls `modify(T&)` on the value in place (under the exclusive lock), then notifies as
    /// send() does. If `modify` throws, the receivers are notified anyway (it may have
    /// changed the value partly) and the exception propagates.
    template <class F>
    void send_modify(F&& modify) {
        send_if_modified([&](T& current) {
            std::invoke(modify, current);
            return true;
        });
    }

    /// Calls `modify(T&) -> bool` on the value in place; notifies (bumps the version, wakes
    /// the waiters) only if it returns true, or throws. Returns what it returned.
    template <class F>
    bool send_if_modified(F&& modify) {
        detail::State<T>& s = state_.get("eddy::watch::Sender::send");
        eddy::detail::WakeList wakes;
        bool modified = true;
        {
            std::unique_lock lock(s.value_lock);
            try {
                modified = std::invoke(modify, s.value);
            } catch (...) {
                publish(s, wakes);
                lock.unlock();
                wakes.wake_all();
                throw;
            }
            if (modified) publish(s, wakes);
        }
        wakes.wake_all();
        return modified;
    }

    /// The current value under a read lock (see Ref).
    Ref<T> borrow() const {
        detail::State<T>& s = state_.get("eddy::watch::Sender::borrow");
        return Ref<T>(std::shared_lock(s.value_lock), s.value, false);
    }

    /// A new receiver that has seen the current value: its changed() waits for the next one.
    Receiver<T> subscribe() const {
        detail::State<T>& s = state_.get("eddy::watch::Sender::subscribe");
        std::lock_guard guard(s.lock);  // not value_lock: subscribing is not a borrow
        ++s.receivers;
        return Receiver<T>(&s, s.version.load(std::memory_order_relaxed));  // the lock orders it
    }

    /// The receivers alive now (a snapshot).
    std::size_t receiver_count() const {
        detail::State<T>& s = state_.get("eddy::watch::Sender::receiver_count");
        std::lock_guard guard(s.lock);
        return s.receivers;
    }
    /// True once every receiver is gone (a snapshot; subscribe() may add one again).
    bool is_closed() const { return receiver_count() == 0; }

private:
    template <class U>
    friend std::pair<Sender<U>, Receiver<U>> channel(U initial);
    explicit Sender(detail::State<T>* s) noexcept : state_(s) {}

    /// value_lock held exclusively: bumps the version and grants every waiter.
    static void publish(detail::State<T>& s, eddy::detail::WakeList& wakes) noexcept {
        std::lock_guard guard(s.lock);
        const std::uint64_t v = s.version.load(std::memory_order_relaxed) + 1;  // only stored here
        s.version.store(v, std::memory_order_release);                          // release: pairs with has_changed()
        // A waiter waits only while its seen version is the current one: v is newer for all.
        while (auto* w = static_cast<typename Receiver<T>::ChangedAwaiter*>(s.waiters.front())) {
            w->observed_ = v;
            s.waiters.grant_front(wakes);
        }
    }

    /// The sender's end (EndRef's Policy): its drop closes the channel, and the waiters wake
    /// to ChannelClosed (they have seen the last value).
    struct Closes {
        static void leave(detail::State<T>& s, eddy::detail::WakeList& wakes) noexcept {
            s.sender_alive = false;
            while (auto* w = static_cast<typename Receiver<T>::ChangedAwaiter*>(s.waiters.front())) {
                w->closed_ = true;
                s.waiters.grant_front(wakes);
            }
        }
    };

    eddy::detail::EndRef<detail::State<T>, Closes> state_;
};

/// A connected pair: `auto [tx, rx] = eddy::watch::channel<T>(initial);` The receiver has
/// seen `initial`.
template <class T>
std::pair<Sender<T>, Receiver<T>> channel(T initial) {
    auto* s = new detail::State<T>(std::move(initial));
    return {Sender<T>(s), Receiver<T>(s, 0)};
}

}  // namespace eddy::watch
