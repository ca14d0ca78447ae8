// io/reactor.hpp: the reactor thread, which owns a runtime's io_uring ring.
//
// # Flow
//   worker:  awaiter -> submit(): push the operation on the inbox (a lock-free intrusive
//            stack). The worker flushes (Driver::flush) when it runs out of local work and
//            every 16 tasks: the eventfd is written only then and only if the reactor is
//            asleep, so a worker that resumes 64 connections wakes it once. While any worker
//            is unparked, the reactor sleeps at most 1 ms, so a post behind a task that runs
//            long is picked up anyway. Cancel requests (any thread) wake it at once.
//   reactor: take the whole inbox, turn each node into an SQE (or a heap entry for a timer),
//            submit them with one io_uring_enter, reap every CQE there is, fire due timers,
//            and push every resumed frame to the injection queue in one bulk push that
//            wakes at most one parked worker. Then sleep in the kernel until a completion,
//            the eventfd (kept armed by a read in the ring) or the earliest timer.
//
// # Sleeping without losing a wake-up
//   The reactor stores sleeping_ (how it sleeps, below), then looks at the inbox once more
//   before entering the kernel; a submitter pushes, then exchanges sleeping_ for kAwake and
//   writes the eventfd if it was asleep. Both sides use seq_cst, so at least one sees the
//   other.
//   A worker's post is deferred to its next flush (batching), which is safe only while the
//   reactor looks at the inbox by itself within kUnflushedBoundNs: it sleeps that bounded
//   (kSleepingBounded) whenever a worker is unparked. When every worker was parked as it
//   went to sleep, it sleeps until a completion or its next timer, however far
//   (kSleepingUnbounded), and a worker that unparks later must not defer: its next flush may never come if it then runs a long task (found
//   by the io/sleep test under load: the sleep behind a spinning task never reached the
//   kernel). So post_deferred() wakes an unbounded sleeper at once.
//
// # Kernel conditions handled
//   - Full SQ: submit what is queued and take the SQE again (never dropped).
//   - CQ overflow: the ring is set up with a CQ four times the SQ; IORING_FEAT_NODROP is
//     required, and when the kernel reports an overflow backlog the reactor reaps and
//     flushes it (io_uring_get_events) before submitting more. -EBUSY from a submission
//     means the same thing and is handled the same way.
//   - A completion with -EINTR is resubmitted; -EAGAIN (a non-blocking descriptor that is
//     not ready) is turned into a poll for readiness, then the operation is resubmitted.
//   - Cancellation: IORING_OP_ASYNC_CANCEL against the operation's user_data; the awaiting
//     frame resumes when the kernel's completion of the original operation arrives.
#pragma once

#include "runtime/counter.hpp"
#include "runtime/driver.hpp"
#include "runtime/inject_queue.hpp"

#include <liburing.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <stop_token>
#include <thread>
#include <vector>

#include <eddy/io/detail/operation.hpp>

namespace eddy::detail {

class Scheduler;
class PollState;
class TimerQueue;

class Reactor final : public Driver {
public:
    /// Sets up the ring; std::system_error saying why when io_uring is unavailable.
    Reactor(Scheduler& sched, unsigned ring_entries);
    ~Reactor() override;

    void start() override;
    void shutdown() noexcept override;

    /// Any thread: queues `node` for the reactor and wakes it if it sleeps.
    void post(ReactorNode& node) noexcept;
    /// Worker thread: queues `node`; the wake-up waits for the worker's flush(), right
    /// after the posting task suspends.
    void post_deferred(ReactorNode& node) noexcept;
    /// post_deferred() on a worker of this reactor's runtime, post() anywhere else.
    void post_any(ReactorNode& node) noexcept;
    Scheduler& scheduler() const noexcept { return sched_; }
    /// Worker `i`'s timer queue (timer_queue.hpp).
    TimerQueue& timer_queue(std::size_t i) noexcept { return *timer_queues_[i]; }
    /// A timer queue's root became `deadline_ns`: wakes the reactor if it sleeps past it.
    void timer_armed(std::int64_t deadline_ns) noexcept;
    void flush() noexcept override;
    void worker_out_of_work(bool parked) noexcept override;
    ReactorMetrics metrics() const noexcept override;

private:
    // user_data values that are not operations (operations are at least 8-aligned).
    static constexpr std::uint64_t kWakeTag = 1;     // the eventfd read
    static constexpr std::uint64_t kIgnoreTag = 2;   // ASYNC_CANCEL requests
    static constexpr std::uint64_t kPollBit = 4;     // op | kPollBit: a readiness poll for op
    static constexpr std::uint64_t kStateBit = 1;    // PollState | kStateBit: a socket's multishot poll
    // The longest sleep while a worker runs: bounds how long a batched post can wait.
    static constexpr std::int64_t kUnflushedBoundNs = 1'000'000;
    // While every worker runs, completions wait at most this long to be handed over together.
    static constexpr std::int64_t kBatchWindowNs = 200'000;

    void push(ReactorNode& node) noexcept;
    void wake_if_sleeping() noexcept;
    void run() noexcept;
    void take_inbox();
    void handle_node(ReactorNode* node);
    void start_io(IoOperation* op);
    void submit_poll(IoOperation* op, bool for_write);
    void start_cancel(Operation* op);
    void reap();
    void handle_cqe(std::uint64_t user_data, std::int32_t res, std::uint32_t flags);
    void arm_poll(PollState* s);
    void cancel_poll(PollState* s);
    void poll_event(PollState* s, std::int32_t res, bool more);
    void fire_timers();
    std::int64_t earliest_timer() const noexcept;
    void complete(Operation* op, std::int32_t result);
    void flush_ready();
    void sleep_in_kernel();
    io_uring_sqe* next_sqe();
    void arm_wake();
    void publish_gauges() noexcept;
    void sleep_batching(std::int64_t bound);
    void track(Operation* op) noexcept;
    void untrack(Operation* op) noexcept;
    void drain_for_shutdown() noexcept;

    Scheduler& sched_;
    io_uring ring_{};
    int event_fd_ = -1;
    bool disabled_ = false;  // the ring waits for the reactor thread to enable it
    std::thread thread_;

    // The inbox: an intrusive stack of nodes. Release CAS in post() pairs with the acquire
    // exchange in take_inbox(), which publishes each node's fields to the reactor.
    std::atomic<ReactorNode*> inbox_{nullptr};
    // Seq_cst against inbox_ (see "Sleeping without losing a wake-up" above).
    static constexpr std::uint32_t kAwake = 0;
    static constexpr std::uint32_t kSleepingBounded = 1;
    static constexpr std::uint32_t kSleepingUnbounded = 2;
    static constexpr std::uint32_t kSleepingBatch = 3;  // on the futex of this word, not in the ring
    std::atomic<std::uint32_t> sleeping_{kAwake};
    // When the sleeping reactor means to look again (steady clock ns; TimerQueue::kNone: not
    // by itself; kAwakeAt while awake, as it looks at every queue before sleeping). Seq_cst
    // against the timer queues' earliest deadlines (timer_queue.hpp).
    static constexpr std::int64_t kAwakeAt = std::numeric_limits<std::int64_t>::min();
    std::atomic<std::int64_t> wake_at_{kAwakeAt};
    // Set by shutdown(), read by run(). Release/acquire: the flag is all that passes.
    std::atomic<bool> stop_{false};
    bool events_pending() const noexcept;
    bool taskrun_flag_ = false;  // the ring reports pending completion work (IORING_SQ_TASKRUN)

    // Reactor thread only.
    InjectQueue::ProducerToken token_;
    std::vector<std::unique_ptr<TimerQueue>> timer_queues_;  // one per worker
    std::vector<std::stop_source> stops_;  // with_timeouts that expired this round
    std::vector<void*> ready_;             // frames to resume, pushed in bulk
    ReactorNode* retry_ = nullptr;         // operations to resubmit (-EINTR, after a poll)
    Operation* in_flight_ = nullptr;       // list of operations the kernel holds
    PollState* armed_ = nullptr;           // list of sockets whose poll the kernel holds
    bool multishot_poll_ = true;           // false once the kernel refused IORING_POLL_ADD_MULTI
    std::size_t pending_cqes_ = 0;         // completions the kernel still owes us
    std::uint64_t wake_buf_ = 0;           // the eventfd read's buffer
    bool wake_armed_ = false;

    // Statistics (eddy/runtime/metrics.hpp): written by the reactor thread only (gauges at
    // the end of each round), except stat_wakeups_, counted by whichever thread wakes it.
    OwnedCounter stat_operations_, stat_submissions_, stat_completions_, stat_timers_fired_;
    OwnedCounter stat_in_flight_, stat_polled_;
    std::size_t polled_ = 0;  // sockets on armed_
    std::atomic<std::uint64_t> stat_wakeups_{0};
};

} // namespace eddy::detail
