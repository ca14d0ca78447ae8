// runtime/inject_queue.cpp: the queue's calls, each inside the TSan ignore scope (see the
// header for why).
#include "inject_queue.hpp"

#include <cstdio>
#include <cstdlib>

// GCC 12 at -O3 reports a bogus -Wstringop-overflow inside moodycamel's enqueue_bulk once it
// is inlined here (an atomic load "writing 8 bytes into a region of size 0"). It is a known
// false positive of GCC 12's object-size tracking; clang and GCC at -O2 are silent.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

namespace eddy::detail {

namespace {
// moodycamel reports a failed allocation by returning false. The callers (schedule, wake-ups)
// are noexcept and a queued frame is the only way it will ever be resumed: losing it would
// hang its task silently, so say so and stop.
[[noreturn]] void out_of_memory() noexcept {
    std::fprintf(stderr, "eddy: out of memory queuing a task on the global queue\n");
    std::abort();
}
}  // namespace

template <class T>
void InjectQueueOf<T>::push(T item) {
    publish(&item, 1);
    IgnoreScope ignore;
    if (!queue_->enqueue(item)) out_of_memory();
}

template <class T>
void InjectQueueOf<T>::push_bulk(ProducerToken& token, const T* items, std::size_t n) {
    publish(items, n);
    IgnoreScope ignore;
    if (!queue_->enqueue_bulk(token.get(), items, n)) out_of_memory();
}

void push_bulk_woken(InjectQueue& q, InjectQueue::ProducerToken& token, void* const* tasks, std::size_t n,
                     std::uint64_t stamp) {
    QueueItem chunk[64];
    for (std::size_t done = 0; done < n;) {
        const std::size_t k = n - done < 64 ? n - done : 64;
        for (std::size_t i = 0; i < k; ++i) chunk[i] = QueueItem{tasks[done + i], stamp};
        q.push_bulk(token, chunk, k);
        done += k;
    }
}

template <class T>
std::size_t InjectQueueOf<T>::pop_bulk(ConsumerToken& token, T* out, std::size_t max) {
    std::size_t n;
    {
        IgnoreScope ignore;
        n = queue_->try_dequeue_bulk(token.get(), out, max);
    }
    consume(out, n);
    return n;
}

template <class T>
std::size_t InjectQueueOf<T>::pop_bulk(T* out, std::size_t max) {
    std::size_t n;
    {
        IgnoreScope ignore;
        n = queue_->try_dequeue_bulk(out, max);
    }
    consume(out, n);
    return n;
}

template <class T>
std::size_t InjectQueueOf<T>::size_approx() const {
    IgnoreScope ignore;
    return queue_->size_approx();
}

template class InjectQueueOf<QueueItem>;
template class InjectQueueOf<void*>;

}  // namespace eddy::detail
