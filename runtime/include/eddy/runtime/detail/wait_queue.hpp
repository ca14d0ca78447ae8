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
//      granted; after unlocking, schedule it (schedule_on). Waiters are always scheduled,
//      never resumed inline.
//   5. The stop callback: lock; if the node is queued and still waiting, unlink it, mark it
//      cancelled and let the primitive pass on what the waiter would have blocked (the
//      queue's cancel hook: a Semaphore's permits); unlock; schedule the waiter. A waiter that
//      was granted first stays granted: the grant wins, nothing is lost or duplicated.
//   6. The awaiter's destructor: the stop callback goes first (StopCallback::reset waits
//      for a callback running on another thread); then, if the node is still
//      waiting (its frame is destroyed while suspended, e.g. by runtime shutdown), it is
//      unlinked under the lock, so the primitive never points at freed memory.
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

    WaitStatus status() const noexcept {
        // Acquire: pairs with the release store of whoever granted or cancelled the node
        // (under the lock), so what the granter handed over is visible.
        return static_cast<WaitStatus>(queue_status_.load(std::memory_order_acquire) & kStatusMask);
    }
    /// Lock held (or the node not shared yet): no other writer.
    void set_status(WaitStatus s) noexcept {
        const std::uintptr_t queue_bits = queue_status_.load(std::memory_order_relaxed) & ~kStatusMask;
        queue_status_.store(queue_bits | static_cast<std::uintptr_t>(s),
                            std::memory_order_release);  // release: pairs with status()
    }

    /// The queue the node waits on (fixed at construction). Relaxed: those bits never change.
    WaitQueue& queue() const noexcept {
        return *reinterpret_cast<WaitQueue*>(queue_status_.load(std::memory_order_relaxed) & ~kStatusMask);
    }

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

/// Nodes granted or cancelled under a lock, scheduled once it is released (FIFO order).
class WakeList {
public:
    WakeList() noexcept = default;
    WakeList(const WakeList&) = delete;
    WakeList& operator=(const WakeList&) = delete;

    /// Lock held; `n` is unlinked from its queue.
    void push(WaitNode& n) noexcept {
        n.next_ = nullptr;
        n.prev_ = tail_;
        if (tail_ != nullptr) {
            tail_->next_ = &n;
        } else {
            head_ = &n;
        }
        tail_ = &n;
    }

    /// Lock released: schedules every node. A granted or cancelled node is suspended and
    /// reachable from nowhere else, so its fields stay ours until it is scheduled.
    ///
    /// The waiters resume in the order they waited. On the caller's own worker (same
    /// runtime) the oldest takes the LIFO slot (it runs next, as a single wake-up's task
    /// does) and the others join the end of the worker's wake queue, which runs oldest first
    /// (runtime/worker.hpp). Any other waiter goes to its runtime's global queue, which is
    /// FIFO too.
    void wake_all() noexcept {
        Scheduler* const here = current_scheduler();
        bool slot_taken = false;
        bool queued = false;
        for (WaitNode* n = head_; n != nullptr;) {
            WaitNode* next = n->next_;  // read first: the waiter may run (and end) at once
            // SAFETY: from here on another thread may resume and destroy the frame.
            if (n->scheduler_ != here || !slot_taken) {
                slot_taken = slot_taken || n->scheduler_ == here;
                schedule_on(n->scheduler_, n->handle_);
            } else {
                schedule_woken_local(n->handle_);
                queued = true;
            }
            n = next;
        }
        if (queued) notify_local_work();
        head_ = tail_ = nullptr;
    }

private:
    WaitNode* head_ = nullptr;
    WaitNode* tail_ = nullptr;
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

static_assert(alignof(WaitQueue) > WaitNode::kStatusMask,
              "a WaitNode keeps its status in the low bits of its queue's address");

/// The base of a primitive's awaiter (CRTP): the protocol's steps 1-3 and 6. `Derived`
/// provides `bool try_now(WakeList&)`, called under the lock: true = the resource was taken
/// (or the wait is over: closed, set), so do not suspend; it may grant other waiters into
/// the list, which are woken after the lock is released.
///
/// Derived awaiters that own data a granter writes into (a value slot) call leave() first
/// in their own destructor, so the node is unlinked before that data is destroyed.
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
    ~WaitAwaiter() { leave(); }

    bool cancelled() const noexcept { return status() == WaitStatus::cancelled; }

    void throw_if_cancelled() const {
        if (cancelled()) throw OperationCancelled(Derived::kCancelled);
    }

    /// Step 6; idempotent.
    void leave() noexcept {
        StopRegistration::reset();  // first: waits for a callback running on another thread
        if (handle_ && status() == WaitStatus::waiting) queue().forget(*this);
        handle_ = nullptr;
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
