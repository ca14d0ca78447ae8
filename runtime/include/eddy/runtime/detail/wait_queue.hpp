// eddy/runtime/detail/wait_queue.hpp: the waiter list and the cancellable wait protocol that
// Event, Latch, Mutex, Semaphore, oneshot and Channel are built on. Not for users: no
// stability promise.
//
// # Pieces
//   WaitNode      one waiter. It lives inside the waiting frame (as the base of the
//                 primitive's awaiter): handle, Scheduler*, prev/next, and a status
//                 {waiting, granted, cancelled}.
//   WaitQueue     an intrusive FIFO doubly-linked list of nodes, guarded by the primitive's
//                 SpinLock (one lock may guard several queues: a Channel's senders and
//                 receivers). Every list operation below requires that lock.
//   WakeList      the nodes a critical section granted; woken after the lock is released.
//   WaitAwaiter   the base of every primitive's awaiter: the protocol below.
//
// # The protocol (one waiter, one primitive)
//   1. await_suspend(h) (templated, to read the task's stop state with cancellation_of(h)):
//      require a worker; if it is already stopped, do not suspend (await_resume
//      throws OperationCancelled).
//   2. Register the stop callback FIRST. It may run inline (a stop raced in): finding the node
//      not yet queued, it only marks it cancelled.
//   3. Take the lock. Cancelled meanwhile -> unlock, do not suspend. The resource is available
//      (the primitive's try_now) -> take it, mark granted, unlock, do not suspend. Else
//      enqueue, unlock, return true and touch NOTHING of the awaiter or the frame: another
//      thread may resume and destroy it at once.
//   4. A grant: under the lock unlink the waiter, hand it the item/permit/ownership, mark it
//      granted and add it to a WakeList. A waiter of the waker's own runtime is scheduled
//      after unlocking; any other (another runtime's, or any waiter when the waker is no
//      worker) is queued on its runtime there and then, under the lock (step 6 says why).
//      Waiters are always scheduled, never resumed inline.
//   5. The stop callback: lock; if the node is queued and still waiting, unlink it, mark it
//      cancelled and let the primitive pass on what the waiter would have blocked (the
//      queue's cancel hook: a Semaphore's permits); unlock; schedule the waiter. A waiter that
//      was granted first stays granted: the grant wins, nothing is lost or duplicated.
//   6. await_resume calls finish_wait() first: the wait is over. A node queued by a waker of
//      another runtime (marked so under the lock) takes the lock once there, so that the
//      waker is out of this runtime's scheduler before the task goes on and its runtime may
//      end. The awaiter's destructor (leave()) acts only when the wait is not over: the frame
//      is destroyed while suspended, which only its runtime's shutdown does. The stop
//      callback goes first (StopRegistration::reset waits for a callback running on another
//      thread); then the queue's lock is taken whatever the status: a waiting node is
//      unlinked, so the primitive never points at freed memory, and a granter of another
//      runtime still handing this node over (step 4) finishes first, so neither the frame
//      nor its runtime is freed under it. leave() returns true when the node was granted:
//      the primitive's awaiter gives back what it was handed (a value to the front of its
//      channel, a permit, the lock), so nothing is lost.
//   Why a waker of the same runtime may schedule after unlocking: that runtime destroys
//   suspended frames only once every one of its workers has stopped, the waker's included.
//   A wait granted at once (step 3) spends a unit of the task's cooperative budget and may
//   make the task yield with its grant in hand (detail/coop_budget.hpp).
#pragma once

#include <atomic>
#include <cassert>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string_view>

#include <eddy/runtime/detail/coop_budget.hpp>
#include <eddy/runtime/detail/scheduler_api.hpp>
#include <eddy/tasks/detail/spin_lock.hpp>
#include <eddy/tasks/detail/promise.hpp>
#include <eddy/tasks/errors.hpp>

namespace eddy::detail {

class WaitQueue;
class WakeList;

enum class WaitStatus : std::uint8_t { waiting, granted, cancelled };

/// One waiter, inside the waiting frame. Fields other than the status are written by the
/// waiting task before it is queued and by lock holders while it is queued.
///
/// Five words: a suspended task's frame holds one, so a million waiting tasks pay for every
/// byte a million times. The status lives in the low bits of the queue pointer (a WaitQueue
/// is at least 4-aligned), and whether the node is queued is read off its links
/// (WaitQueue::queued) rather than kept in a flag.
class WaitNode {
public:
    explicit WaitNode(WaitQueue& queue) noexcept : queue_status_(reinterpret_cast<std::uintptr_t>(&queue)) {}
    WaitNode(const WaitNode&) = delete;
    WaitNode& operator=(const WaitNode&) = delete;

    static constexpr std::uintptr_t kStatusMask = 3;  // the status bits of queue_status_
    static constexpr std::uintptr_t kAcross = 4;      // handed over by a waker of another runtime
    static constexpr std::uintptr_t kBitsMask = kStatusMask | kAcross;

    WaitStatus status() const noexcept {
        // Acquire: pairs with the release store of whoever granted or cancelled the node
        // (under the lock), so what the granter handed over is visible.
        return static_cast<WaitStatus>(queue_status_.load(std::memory_order_acquire) & kStatusMask);
    }
    /// Lock held (or the node not shared yet): no other writer.
    void set_status(WaitStatus s) noexcept {
        const std::uintptr_t queue_bits =
            queue_status_.load(std::memory_order_relaxed) & ~kStatusMask;  // keeps kAcross
        queue_status_.store(queue_bits | static_cast<std::uintptr_t>(s),
                            std::memory_order_release);  // release: pairs with status()
    }

    /// The queue the node waits on (fixed at construction). Relaxed: those bits never change.
    WaitQueue& queue() const noexcept {
        return *reinterpret_cast<WaitQueue*>(queue_status_.load(std::memory_order_relaxed) & ~kBitsMask);
    }

    /// Lock held, granted or cancelled: a waker that is no worker of this node's runtime is about
    /// to queue it there under the lock (WakeList::push). Release: pairs with handed_across().
    void mark_across() noexcept {
        queue_status_.store(queue_status_.load(std::memory_order_relaxed) | kAcross, std::memory_order_release);
    }
    /// By the resumed waiter: mark_across() happened. Acquire: pairs with it.
    bool handed_across() const noexcept { return (queue_status_.load(std::memory_order_acquire) & kAcross) != 0; }

private:
    friend class WaitQueue;
    friend class WakeList;
    template <class Derived>
    friend class WaitAwaiter;

    /// Relaxed, lock held: the status without the ordering status() gives.
    WaitStatus status_locked() const noexcept {
        return static_cast<WaitStatus>(queue_status_.load(std::memory_order_relaxed) & kStatusMask);
    }

    // The queue's address | the status. The status is stored under the queue's lock (or
    // before the node is shared); read without it by the resumed waiter (await_resume,
    // destructor), which the grant or cancel happened before.
    std::atomic<std::uintptr_t> queue_status_;
    WaitNode* prev_ = nullptr;  // guarded by the queue's lock, like next_
    WaitNode* next_ = nullptr;
    std::coroutine_handle<> handle_;
    Scheduler* scheduler_ = nullptr;
};

/// Nodes granted or cancelled under a lock: those of the waker's own runtime are scheduled
/// once it is released (FIFO order), any other at once (protocol step 4).
class WakeList {
public:
    WakeList() noexcept = default;
    WakeList(const WakeList&) = delete;
    WakeList& operator=(const WakeList&) = delete;

    /// Lock held; `n` is unlinked from its queue.
    void push(WaitNode& n) noexcept {
        if (!here_known_) {
            here_ = current_scheduler();
            here_known_ = true;
        }
        if (n.scheduler_ != here_) {
            // Another runtime's waiter (or any waiter, off a worker): queued on its runtime
            // while the lock is held. Its frame cannot be destroyed meanwhile (leave() takes
            // this lock), nor resume past finish_wait(), which takes it too once marked, so
            // its runtime cannot end under the push. Its node is ours no more.
            n.mark_across();
            schedule_on(n.scheduler_, n.handle_);
            return;
        }
        n.next_ = nullptr;
        n.prev_ = tail_;
        if (tail_ != nullptr) {
            tail_->next_ = &n;
        } else {
            head_ = &n;
        }
        tail_ = &n;
    }

    /// Lock released: schedules the nodes of this worker's runtime. Each one is suspended and
    /// reachable from nowhere else, so its fields stay ours until it is scheduled.
    ///
    /// The waiters resume in the order they waited: the oldest takes the LIFO slot (it runs
    /// next, as a single wake-up's task does) and the others join the end of the worker's
    /// wake queue, which runs oldest first (runtime/worker.hpp).
    void wake_all() noexcept {
        WaitNode* n = head_;
        if (n == nullptr) return;
        head_ = tail_ = nullptr;
        WaitNode* next = n->next_;  // read first: the waiter may run (and end) at once
        // SAFETY: from here on another thread may resume and destroy the frame.
        schedule_on(here_, n->handle_);
        if (next == nullptr) return;
        for (n = next; n != nullptr; n = next) {
            next = n->next_;
            schedule_woken_local(n->handle_);
        }
        notify_local_work();
    }

private:
    WaitNode* head_ = nullptr;
    WaitNode* tail_ = nullptr;
    Scheduler* here_ = nullptr;  // the waker's runtime (null off a worker), once here_known_
    bool here_known_ = false;
};

/// An intrusive FIFO list of waiters guarded by `lock`. `on_cancel(owner, wakes)`, if given,
/// runs under the lock after a queued waiter was cancelled, to grant what that waiter was
/// holding up. `owner` (the primitive) also lets an awaiter find its primitive through its
/// node, without a pointer of its own.
class WaitQueue {
public:
    using CancelHook = void (*)(void* owner, WakeList& wakes) noexcept;

    explicit WaitQueue(SpinLock& lock, CancelHook on_cancel = nullptr, void* owner = nullptr) noexcept
        : lock_(lock), on_cancel_(on_cancel), owner_(owner) {}
    WaitQueue(const WaitQueue&) = delete;
    WaitQueue& operator=(const WaitQueue&) = delete;

    SpinLock& lock() const noexcept { return lock_; }
    void* owner() const noexcept { return owner_; }

    // --- lock held ---
    bool empty() const noexcept { return head_ == nullptr; }
    std::size_t size() const noexcept { return size_; }
    WaitNode* front() const noexcept { return head_; }

    void push_back(WaitNode& n) noexcept {
        n.prev_ = tail_;
        n.next_ = nullptr;
        if (tail_ != nullptr) {
            tail_->next_ = &n;
        } else {
            head_ = &n;
        }
        tail_ = &n;
        ++size_;
    }

    void remove(WaitNode& n) noexcept {
        if (n.prev_ != nullptr) {
            n.prev_->next_ = n.next_;
        } else {
            head_ = n.next_;
        }
        if (n.next_ != nullptr) {
            n.next_->prev_ = n.prev_;
        } else {
            tail_ = n.prev_;
        }
        n.prev_ = n.next_ = nullptr;
        --size_;
    }

    /// True when `n` (still waiting) is in this queue: a waiting node is in no other list, so
    /// its links say it (the only node without a predecessor is the head).
    bool queued(const WaitNode& n) const noexcept { return n.prev_ != nullptr || head_ == &n; }

    /// Unlinks the first waiter, marks it granted and adds it to `wakes`. The caller has
    /// handed it its item/permit/ownership first. Returns it (nullptr if the queue is empty).
    WaitNode* grant_front(WakeList& wakes) noexcept {
        WaitNode* n = head_;
        if (n == nullptr) return nullptr;
        remove(*n);
        n->set_status(WaitStatus::granted);
        wakes.push(*n);
        return n;
    }

    /// Grants every waiter (Event::set, Latch at zero, Channel::close).
    void grant_all(WakeList& wakes) noexcept {
        while (grant_front(wakes) != nullptr) {
        }
    }

    // --- lock not held ---

    /// Step 5, the stop callback.
    void cancel(WaitNode& n) noexcept {
        WakeList wakes;
        {
            std::lock_guard guard(lock_);
            // Relaxed: every store to the status is made under this lock (or before the node
            // is shared), so the lock orders it.
            if (n.status_locked() != WaitStatus::waiting) return;  // granted: it wins
            if (!queued(n)) {
                // Not queued yet: await_suspend sees this under the lock and does not suspend.
                n.set_status(WaitStatus::cancelled);
                return;
            }
            remove(n);
            n.set_status(WaitStatus::cancelled);
            wakes.push(n);
            if (on_cancel_ != nullptr) on_cancel_(owner_, wakes);
        }
        wakes.wake_all();
    }

    /// Step 6: the frame holding `n` is destroyed; unlink it if it is still queued.
    void forget(WaitNode& n) noexcept {
        std::lock_guard guard(lock_);
        if (n.status_locked() == WaitStatus::waiting && queued(n)) remove(n);
    }

private:
    SpinLock& lock_;
    CancelHook on_cancel_;
    void* owner_;
    WaitNode* head_ = nullptr;
    WaitNode* tail_ = nullptr;
    std::size_t size_ = 0;
};

static_assert(alignof(WaitQueue) > WaitNode::kBitsMask,
              "a WaitNode keeps its status in the low bits of its queue's address");

/// The base of a primitive's awaiter (CRTP): the protocol's steps 1-3 and 6. `Derived`
/// provides `bool try_now(WakeList&)`, called under the lock: true = the resource was taken
/// (or the wait is over: closed, set), so do not suspend; it may grant other waiters into
/// the list, which are woken after the lock is released.
///
/// Derived awaiters that own data a granter writes into (a value slot), or that were handed
/// something to give back, call leave() first in their own destructor, so the node is
/// unlinked (and any granter done with it) before that data is destroyed; its result says
/// whether to give back. Every await_resume calls finish_wait() first.
template <class Derived>
class WaitAwaiter : public WaitNode, private StopRegistration {
public:
    /// Points into the caller's primitive (a Mutex, a channel): awaited in place, never spawned
    /// (eddy/tasks/awaitable.hpp).
    using borrows_operands = void;
    bool await_ready() const noexcept { return false; }

    /// Task dumps: "eddy::Mutex::lock 0x55d0c2a4e2a0": its wait queue's address, which
    /// lies in the primitive (taken from this node, never read through: a waiter granted but
    /// not yet resumed may outlive a primitive destroyed meanwhile).
    void dump_wait(DumpWait& d) const {
        std::string_view what(Derived::kWhat);
        if (what.starts_with("co_await on ")) what.remove_prefix(12);
        d.text(what);
        d.text(" ");
        d.address(&queue());
    }

    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) {
        Scheduler& sched = require_worker(Derived::kWhat);
        StopState* stop = cancellation_of(h);
        if (stop_requested(stop)) {
            set_status(WaitStatus::cancelled);
            return false;
        }
        handle_ = h;
        scheduler_ = &sched;
        // Step 2: may run the callback inline, which then only marks us cancelled.
        if (stop != nullptr) attach(*stop);
        WakeList wakes;
        bool suspend = false;
        {
            std::lock_guard guard(queue().lock());
            // Relaxed: the stop callback stores under this lock.
            if (status_locked() == WaitStatus::cancelled) {
                // the stop won before we were queued: do not suspend
            } else if (static_cast<Derived*>(this)->try_now(wakes)) {
                set_status(WaitStatus::granted);
            } else {
                queue().push_back(*this);
                suspend = true;
            }
        }
        // SAFETY: when suspending, the frame is queued from the unlock on: a granter or the
        // stop callback may resume (and destroy) it on another thread. Touch nothing of
        // `this` below; wake_all only reads the list it owns.
        wakes.wake_all();
        return suspend || coop_yield(h);  // granted at once: spends budget (coop_budget.hpp)
    }

protected:
    explicit WaitAwaiter(WaitQueue& queue) noexcept : WaitNode(queue), StopRegistration(&on_stop) {}
    /// Movable until first awaited, like a Rust future before its first poll: the new node
    /// waits on the same queue; the old one was never queued nor registered, so its
    /// destructor does nothing. Moving it after its await_suspend ran is a bug.
    WaitAwaiter(WaitAwaiter&& o) noexcept : WaitNode(o.queue()), StopRegistration(&on_stop) {
        assert(!o.handle_ && o.status() == WaitStatus::waiting && "eddy: an awaiter moved after it was awaited");
    }
    ~WaitAwaiter() { (void)leave(); }

    bool cancelled() const noexcept { return status() == WaitStatus::cancelled; }

    /// Step 6: the first call of every await_resume. The wait is over (leave() has nothing
    /// left to do); throws OperationCancelled if it was cancelled.
    void finish_wait() {
        if (handed_across()) [[unlikely]] {
            // The waker (another runtime's, or no worker) queued us under the lock and may
            // still be in our runtime's scheduler: it is done once the lock is free.
            std::lock_guard guard(queue().lock());
        }
        handle_ = nullptr;
        if (cancelled()) throw OperationCancelled(Derived::kCancelled);
    }

    /// Step 6, from the awaiter's destructor; idempotent. True when the node was granted but
    /// never resumed (its frame is being destroyed): the caller gives back what it was handed.
    bool leave() noexcept {
        StopRegistration::reset();   // first: waits for a callback running on another thread
        if (!handle_) return false;  // never suspended, or resumed (finish_wait)
        queue().forget(*this);       // the lock, whatever the status (step 6)
        handle_ = nullptr;           // after: a granter reads it under the lock
        return status() == WaitStatus::granted;
    }

private:
    /// Step 5, run by the stop state: the stop callback is this object's second base (no
    /// function object stored: it knows where the node is).
    static void on_stop(StopRegistration* r) noexcept {
        WaitNode& node = *static_cast<WaitAwaiter*>(r);
        node.queue().cancel(node);
    }
};

}  // namespace eddy::detail
