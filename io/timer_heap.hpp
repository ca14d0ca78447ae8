// io/timer_heap.hpp: the reactor thread's pending timers, a binary min-heap on the deadline.
//
// Why a heap and not a wheel: the reactor arms one kernel timeout (the wait's timeout) for
// the earliest deadline, so all it needs is "earliest" and "remove this one" (cancellation).
// A heap gives both in O(log n) with exact deadlines (a wheel rounds to its tick and must
// re-check), and 100,000 inserts plus pops take about 13 ms in total on this machine (the
// timers benchmark's 1..10 ms spread), a small part of its overhead. Each timer records its index, so
// removal needs no search.
#pragma once

#include "runtime/private.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

#include <eddy/io/detail/operation.hpp>

namespace eddy::detail {

class TimerHeap {
public:
    bool empty() const noexcept { return heap_.empty(); }
    std::size_t size() const noexcept { return heap_.size(); }
    TimerOperation* top() const noexcept { return heap_.front(); }

    void push(TimerOperation* t) {
        t->heap_index = heap_.size();
        heap_.push_back(t);
        sift_up(t->heap_index);
    }

    void remove(TimerOperation* t) noexcept {
        const std::size_t i = t->heap_index;
        TimerOperation* last = heap_.back();
        heap_.pop_back();
        if (last == t) return;
        heap_[i] = last;
        last->heap_index = i;
        sift_up(i);
        sift_down(last->heap_index);
    }

    /// Takes every timer whose deadline is at or before `now_ns` (earliest first).
    template <class F>
    void pop_expired(std::int64_t now_ns, F&& f) {
        while (!heap_.empty() && heap_.front()->deadline_ns <= now_ns) {
            TimerOperation* t = heap_.front();
            remove(t);
            f(t);
        }
    }

    /// Every pending timer, emptying the heap (shutdown).
    std::vector<TimerOperation*> take_all() noexcept { return std::move(heap_); }

private:
    void place(std::size_t i, TimerOperation* t) noexcept {
        heap_[i] = t;
        t->heap_index = i;
    }
    void sift_up(std::size_t i) noexcept {
        TimerOperation* t = heap_[i];
        while (i > 0) {
            const std::size_t parent = (i - 1) / 2;
            if (heap_[parent]->deadline_ns <= t->deadline_ns) break;
            place(i, heap_[parent]);
            i = parent;
        }
        place(i, t);
    }
    void sift_down(std::size_t i) noexcept {
        TimerOperation* t = heap_[i];
        const std::size_t n = heap_.size();
        for (;;) {
            std::size_t child = 2 * i + 1;
            if (child >= n) break;
            if (child + 1 < n && heap_[child + 1]->deadline_ns < heap_[child]->deadline_ns) ++child;
            if (t->deadline_ns <= heap_[child]->deadline_ns) break;
            place(i, heap_[child]);
            i = child;
        }
        place(i, t);
    }

    std::vector<TimerOperation*> heap_;
};

} // namespace eddy::detail
