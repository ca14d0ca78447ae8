// runtime/worker.hpp: one worker thread: its deque, its run loop, stealing and parking.
//
// The run loop, each turn:
//   1. next_task(): every kGlobalQueueInterval-th turn the global queue first (so injected
//      tasks cannot starve behind a busy deque), then the own deque (LIFO), then a batch from
//      the global queue, then the tasks that yielded (see defer()).
//   2. Otherwise steal_work(): become a searcher (idle.hpp, rule 2), steal half of a random
//      victim's deque, else take from the global queue.
//   3. Otherwise park() until notified (idle.hpp, rule 4 closes the lost-wakeup window).
// A worker that found work while searching stops searching (rule 3) before running it.
//
// Fields are owned by the worker thread unless marked: other threads touch only deque_
// (steal_into, empty) and parker_ (unpark).
#pragma once

#include "runtime/private.hpp"
#include "runtime/chase_lev_deque.hpp"
#include "runtime/inject_queue.hpp"
#include "runtime/parker.hpp"

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <deque>

#ifndef EDDY_LOCAL_QUEUE_CAPACITY
#define EDDY_LOCAL_QUEUE_CAPACITY 256
#endif

namespace eddy::detail {

class Scheduler;

/// Slots per worker deque. 256 is Tokio's choice (a guess it never retuned); it keeps a
/// deque within 2 KiB. The small_queues build option shrinks it to 4 so that overflow and
/// steal-the-last-item paths run constantly in tests.
inline constexpr std::size_t kLocalQueueCapacity = EDDY_LOCAL_QUEUE_CAPACITY;

/// How often a busy worker looks at the global queue first. 61, like Tokio: prime so that
/// it does not fall into step with periodic task patterns; a guess, retune with data.
inline constexpr std::uint32_t kGlobalQueueInterval = 61;

/// At most this many tasks are moved from the global queue per visit: enough to amortize the
/// queue's cost, few enough to leave work for the other workers. A guess; retune with data.
inline constexpr std::size_t kGlobalBatch = 32;

class Worker {
public:
    Worker(Scheduler& scheduler, std::size_t index);
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;

    /// The thread body.
    void run();

    /// Owner thread: queues a task on this deque; half of a full deque moves to the global
    /// queue first.
    void push_local(void* task) noexcept;
    /// Owner thread: queues a task behind everything else runnable here (yield_now).
    void defer(void* task) { deferred_.push_back(task); }

    /// After the thread was joined (shutdown): forgets every queued task.
    void clear_queues() noexcept;

    Scheduler& scheduler() const noexcept { return sched_; }
    std::size_t index() const noexcept { return index_; }
    ChaseLevDeque<void*>& deque() noexcept { return deque_; }  // any thread: steal, empty
    Parker& parker() noexcept { return parker_; }                // any thread: unpark

private:
    void* next_task();
    void* steal_work();
    void park();
    void leave_searching() noexcept;
    bool pop_global_batch(void*& out);
    void refill_from_deferred();
    std::uint64_t next_random() noexcept;

    Scheduler& sched_;
    const std::size_t index_;
    ChaseLevDeque<void*> deque_;
    Parker parker_;
    InjectQueue::ProducerToken producer_;
    InjectQueue::ConsumerToken consumer_;
    std::deque<void*> deferred_;  // yielded tasks, oldest first
    std::uint32_t tick_ = 0;
    bool searching_ = false;
    std::uint64_t rng_;
};

/// The worker running on the calling thread, or nullptr.
Worker* current_worker() noexcept;

} // namespace eddy::detail
