// io/timer_queue.cpp: see timer_queue.hpp and eddy/io/detail/timer.hpp.
#include "io/timer_queue.hpp"

#include "io/reactor.hpp"
#include "runtime/worker.hpp"

#include <cerrno>

#include <eddy/runtime/detail/scheduler_api.hpp>

namespace eddy::detail {

TimerQueue& current_timer_queue(const char* what) {
    Reactor& reactor = current_reactor(what);  // WrongThread off a worker
    return reactor.timer_queue(current_worker()->index());
}

bool arm_timer(TimerEntry& e) noexcept { return e.queue->arm(e); }

bool disarm_timer(TimerEntry& e) noexcept { return e.queue != nullptr && e.queue->disarm(e); }

void cancel_timer(TimerEntry& e) noexcept { e.queue->cancel(e); }

bool TimerQueue::arm(TimerEntry& e) noexcept {
    lock_.lock();
    if (e.state == TimerEntry::State::kCancelled) {  // a stop callback came first
        lock_.unlock();
        e.result = -ECANCELED;
        return false;
    }
    const std::int64_t deadline = e.deadline_ns;
    insert(&e);
    e.state = TimerEntry::State::kQueued;
    size_.store(size_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    const bool new_root = root_ == &e;
    if (new_root) publish_earliest(std::memory_order_seq_cst);  // see timer_queue.hpp
    lock_.unlock();
    // `e` may fire and its frame go from here on; the queue and the reactor stay.
    if (new_root) reactor_.timer_armed(deadline);
    return true;
}

bool TimerQueue::disarm(TimerEntry& e) noexcept {
    lock_.lock();
    const bool queued = e.state == TimerEntry::State::kQueued;
    if (queued) {
        const bool was_root = root_ == &e;
        remove(&e);
        e.state = TimerEntry::State::kIdle;
        size_.store(size_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
        if (was_root) publish_earliest(std::memory_order_relaxed);  // later: no wake needed
    }
    lock_.unlock();
    return queued;
}

void TimerQueue::cancel(TimerEntry& e) noexcept {
    lock_.lock();
    switch (e.state) {
    case TimerEntry::State::kIdle:  // not armed yet: arm() will see it and not suspend
        e.state = TimerEntry::State::kCancelled;
        lock_.unlock();
        return;
    case TimerEntry::State::kQueued: {
        const bool was_root = root_ == &e;
        remove(&e);
        e.state = TimerEntry::State::kCancelled;
        e.result = -ECANCELED;
        size_.store(size_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
        if (was_root) publish_earliest(std::memory_order_relaxed);
        const std::coroutine_handle<> waiter = e.waiter;
        Scheduler& sched = reactor_.scheduler();
        lock_.unlock();
        schedule_on(&sched, waiter);  // the last touch of e
        return;
    }
    case TimerEntry::State::kFired:      // the reactor resumes it
    case TimerEntry::State::kCancelled:  // the other callback came first
        lock_.unlock();
        return;
    }
}

void TimerQueue::clear() noexcept {
    lock_.lock();
    // Every entry reachable from the root, depth first through the child and sibling links.
    TimerEntry* stack = root_;
    if (stack != nullptr) stack->next = nullptr;
    while (stack != nullptr) {
        TimerEntry* e = stack;
        stack = e->next;
        for (TimerEntry* c = e->child; c != nullptr;) {
            TimerEntry* sibling = c->next;
            c->next = stack;
            stack = c;
            c = sibling;
        }
        e->child = e->next = e->prev = nullptr;
        e->state = TimerEntry::State::kCancelled;
    }
    root_ = nullptr;
    size_.store(0, std::memory_order_relaxed);
    publish_earliest(std::memory_order_relaxed);
    lock_.unlock();
}

// --- the pairing heap (under lock_) ----------------------------------------------------------

TimerEntry* TimerQueue::meld(TimerEntry* a, TimerEntry* b) noexcept {
    // Two roots (no siblings, no parent): the later one becomes the first child of the other.
    if (a == nullptr) return b;
    if (b == nullptr) return a;
    if (b->deadline_ns < a->deadline_ns) std::swap(a, b);
    b->prev = a;
    b->next = a->child;
    if (a->child != nullptr) a->child->prev = b;
    a->child = b;
    return a;
}

TimerEntry* TimerQueue::merge_pairs(TimerEntry* first) noexcept {
    // The classic two passes over a list of sibling subtrees: meld them in pairs from the
    // left, then meld the pairs from the right into one tree.
    TimerEntry* pairs = nullptr;  // the melded pairs, most recent first (through next)
    while (first != nullptr) {
        TimerEntry* a = first;
        TimerEntry* b = a->next;
        first = b != nullptr ? b->next : nullptr;
        a->next = a->prev = nullptr;
        if (b != nullptr) b->next = b->prev = nullptr;
        TimerEntry* m = meld(a, b);
        m->next = pairs;
        pairs = m;
    }
    TimerEntry* root = nullptr;
    while (pairs != nullptr) {
        TimerEntry* rest = pairs->next;
        pairs->next = nullptr;
        root = meld(root, pairs);
        pairs = rest;
    }
    return root;
}

void TimerQueue::insert(TimerEntry* e) noexcept {
    e->child = e->next = e->prev = nullptr;
    root_ = meld(root_, e);
}

void TimerQueue::remove(TimerEntry* e) noexcept {
    if (e == root_) {
        root_ = merge_pairs(e->child);
    } else {
        // Cut e's subtree out of its sibling list, then meld its children back in.
        if (e->prev->child == e) {
            e->prev->child = e->next;  // e was the first child of prev
        } else {
            e->prev->next = e->next;
        }
        if (e->next != nullptr) e->next->prev = e->prev;
        root_ = meld(root_, merge_pairs(e->child));
    }
    e->child = e->next = e->prev = nullptr;
}

} // namespace eddy::detail
