// runtime/inject_queue.hpp: the global queues, over moodycamel::ConcurrentQueue.
//
// A runtime has two (Scheduler::global_wakes, global_spawns; worker.hpp says why): they
// take what the reactor completes, tasks spawned or woken from outside the runtime and the
// overflow of full worker queues, and every worker drains them. InjectQueueOf<T> holds
// items of type T: QueueItems (queue_item.hpp: a task and when it was woken) for woken
// tasks, plain task addresses for spawned ones, which carry no stamp (half the bytes: a
// million spawns pass through it in spawn_many). Order: FIFO per producer only
// (moodycamel's guarantee), which is all the scheduler needs: nothing in eddy relies on
// global FIFO across producers.
//
// # ThreadSanitizer: the one allowed exception in eddy
// ConcurrentQueue synchronizes with standalone thread fences, which TSan does not
// model: it reports false races inside enqueue/try_dequeue (seen with 4 producers and 3
// consumers), and g++ 12 rejects the fences under -fsanitize=thread with -Wtsan (an error with
// -Werror). So, in TSan builds only, this adapter
//   1. tells TSan to ignore every memory access made inside the queue's own calls
//      (AnnotateIgnoreReadsBegin/End, AnnotateIgnoreWritesBegin/End), and
//   2. publishes the hand-off itself: __tsan_release(task) before an item is enqueued and
//      __tsan_acquire(task) after it is dequeued. The task is a coroutine frame address, so
//      TSan sees "everything the producer did to the frame happens before the consumer runs
//      it", which is exactly the guarantee the queue gives for real.
// The -Wtsan warning is silenced for the queue's header only (the pragma below). eddy's own
// synchronization is never annotated or suppressed anywhere else.
#pragma once

#include "private.hpp"
#include "queue_item.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#if defined(__SANITIZE_THREAD__)
#define EDDY_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EDDY_TSAN 1
#endif
#endif

#pragma GCC diagnostic push
#if defined(EDDY_TSAN) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wtsan"
#endif
#include <concurrentqueue/concurrentqueue.h>
#pragma GCC diagnostic pop

#ifdef EDDY_TSAN
#include <sanitizer/tsan_interface.h>
extern "C" {
void AnnotateIgnoreReadsBegin(const char* file, int line);
void AnnotateIgnoreReadsEnd(const char* file, int line);
void AnnotateIgnoreWritesBegin(const char* file, int line);
void AnnotateIgnoreWritesEnd(const char* file, int line);
}
#endif

namespace eddy::detail {

/// The task a queue item stands for (the address TSan's hand-off annotations use).
inline void* task_of(void* item) noexcept { return item; }
inline void* task_of(const QueueItem& item) noexcept { return item.task; }

template <class T>
class InjectQueueOf {
public:
    /// A producer or consumer token; creating and destroying one touches the queue's
    /// internals, so both happen inside the TSan ignore scope too.
    template <class Token>
    class TokenHolder {
    public:
        explicit TokenHolder(InjectQueueOf& q) {
            IgnoreScope ignore;
            token_.emplace(*q.queue_);
        }
        ~TokenHolder() {
            IgnoreScope ignore;
            token_.reset();
        }
        TokenHolder(const TokenHolder&) = delete;
        TokenHolder& operator=(const TokenHolder&) = delete;
        Token& get() noexcept { return *token_; }

    private:
        std::optional<Token> token_;
    };
    using ProducerToken = TokenHolder<moodycamel::ProducerToken>;
    using ConsumerToken = TokenHolder<moodycamel::ConsumerToken>;

    InjectQueueOf() {
        IgnoreScope ignore;
        queue_ = std::make_unique<moodycamel::ConcurrentQueue<T>>();
    }
    ~InjectQueueOf() {
        IgnoreScope ignore;
        queue_.reset();
    }
    InjectQueueOf(const InjectQueueOf&) = delete;
    InjectQueueOf& operator=(const InjectQueueOf&) = delete;

    /// Any thread (implicit per-thread producer).
    void push(T item);
    /// A worker's overflow: with the caller's own producer token.
    void push_bulk(ProducerToken& token, const T* items, std::size_t n);
    /// Any worker: up to `max` items into `out`; returns how many.
    std::size_t pop_bulk(ConsumerToken& token, T* out, std::size_t max);
    /// Without a token: shutdown drains, task dumps and tests.
    std::size_t pop_bulk(T* out, std::size_t max);
    /// An estimate; exact when no producer or consumer is active.
    std::size_t size_approx() const;

private:
#ifdef EDDY_TSAN
    struct IgnoreScope {
        IgnoreScope() {
            AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
            AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
        }
        ~IgnoreScope() {
            AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
            AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
        }
        IgnoreScope(const IgnoreScope&) = delete;
        IgnoreScope& operator=(const IgnoreScope&) = delete;
    };
    static void publish(const T* items, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i) __tsan_release(task_of(items[i]));
    }
    static void consume(const T* items, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i) __tsan_acquire(task_of(items[i]));
    }
#else
    struct IgnoreScope {
        IgnoreScope() noexcept {}  // user-provided: keeps -Wunused-variable quiet at uses
    };
    static void publish(const T*, std::size_t) noexcept {}
    static void consume(const T*, std::size_t) noexcept {}
#endif

    std::unique_ptr<moodycamel::ConcurrentQueue<T>> queue_;
};

/// The global wake queue's type; its tokens are every InjectQueueOf's.
using InjectQueue = InjectQueueOf<QueueItem>;
/// The global spawn queue's.
using SpawnQueue = InjectQueueOf<void*>;
extern template class InjectQueueOf<QueueItem>;
extern template class InjectQueueOf<void*>;

/// The reactor's completions: `n` tasks woken at `stamp` (queue_item.hpp), in bulk.
void push_bulk_woken(InjectQueue& q, InjectQueue::ProducerToken& token, void* const* tasks, std::size_t n,
                     std::uint64_t stamp);

}  // namespace eddy::detail
