// io/reactor/reactor.hpp: the reactor thread, which owns a runtime's io_uring ring, or where the
// kernel refuses io_uring, its epoll set.
//
// # Two kernel interfaces
//   Everything below is the same for both drivers (RuntimeConfig::driver): the inbox, the
//   retries, the timer queues, the sleep protocol, the hand-over, the cancel protocol,
//   virtual time and shutdown. The steps that touch the kernel (start_io, submit_poll,
//   start_cancel, arm_poll, cancel_poll, reap, the sleep itself, the shutdown drain) go to
//   io_uring, as described here, or to the readiness driver (epoll_ != nullptr), whose map
//   is the prologue of reactor_epoll.cpp.
//
// # Flow
//   worker:  an I/O operation's awaiter -> submit(): push the operation on the inbox (a
//            lock-free intrusive stack). The worker flushes (Driver::flush) when it runs out
//            of local work and every 16 tasks: the reactor is woken only then and only if it
//            sleeps. Cancel requests (any thread) wake it at once. Sockets need no post:
//            they wait on their PollState (poll_state.hpp), and timers are queued on the
//            workers' own timer queues (timer_queue.hpp).
//   reactor: take the whole inbox, turn each node into an SQE (an operation, a socket's
//            multishot poll, a cancel), submit them with one io_uring_enter, reap every CQE
//            there is, fire the due timers of every worker's queue, and push every frame (or
//            socket retry) to resume to the injection queue in one bulk push that wakes at
//            most one parked worker.
//
// # How the reactor sleeps
//   Every worker parked: in the ring (io_uring_submit_and_wait_timeout), until a
//     completion, the eventfd (kept armed by a read in the ring, written by post() and
//     flushes) or the earliest timer. kSleepingUnbounded, or kSleepingBounded when a timer
//     is due within kUnflushedBoundNs.
//   Some worker running: batching (kSleepingBatch), on a futex, not in the ring, for at most
//     kBatchWindowNs (kPartialBatchWindowNs while another worker is parked) or until the
//     earliest timer: completions that arrive meanwhile wait in the kernel and are handed
//     over together. A worker that runs out of work wakes us (worker_out_of_work(): when the
//     ring reports pending completion work, IORING_SQ_TASKRUN, before it spins; always when
//     it parks), so that batching never leaves a worker idle with work held back.
//   Measured on the echo benchmark: waking in the ring for every completion while a worker
//   ran cost a context switch per 3 round trips; batching, one per 10 (README).
//   Each time it wakes while a worker runs, the reactor lets the watchdog look at the
//   workers (long polls, LIFO slots held by them: runtime/watchdog.hpp); with nothing in the
//   ring it then sleeps kIdleRingWatchNs, the watchdog's pace. Sleeping unbounded it does
//   not watch (Scheduler::unwatched_flag()): a worker that fills its empty LIFO slot then wakes it
//   (watch()), and so does every woken worker when the long-poll detector is on. (Waking it
//   at every unpark cost `fanout` with 2 workers 9 %.) Its second look before sleeping
//   unbounded checks the idle state again.
//
// # Sleeping without losing a wake-up
//   The reactor stores sleeping_ (how it sleeps), then its deadline wake_at_, then looks at
//   the inbox, the timer queues and the idle state once more before it sleeps; a submitter
//   pushes, then exchanges sleeping_ for kAwake and writes the eventfd (or wakes the futex)
//   if it was asleep; a worker that arms a timer earlier than wake_at_ does the same
//   (timer_queue.hpp); a worker that parks reads sleeping_ after its seq_cst RMW of the idle
//   state. All of these are seq_cst, so one side always sees the other.
//   A worker's post is deferred to its next flush, which is safe only while the reactor
//   looks at the inbox by itself soon: it does, batching, within the window. Sleeping in the
//   ring with every worker parked, it would not (kSleepingUnbounded), and a worker that
//   unparks later must not defer: its next flush may never come if it then runs a long task
//   (found by the time/sleep test under load). So post_deferred() wakes an unbounded sleeper
//   at once.
//
// # Virtual time (ClockMode::paused, manual; io/reactor/virtual_time.cpp)
//   Timers fire by the runtime's virtual clock. Instead of sleeping until the earliest timer,
//   the reactor, finding the runtime quiet (eddy/runtime/time.hpp), moves the clock to it (or
//   to an advance()'s target) and goes round again; while it cannot (a blocking call runs) it
//   looks again every kVirtualPollNs of real time. A worker that parks wakes it as usual
//   (worker_out_of_work), and so does any timer armed while it sleeps unbounded.
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
//   - Deadlines (eddy::with_deadline): the operation's SQE (or its readiness poll's) is
//     linked to an IORING_OP_LINK_TIMEOUT, the two taken together (link_timeout.cpp).
#pragma once

#include "private.hpp"

#include <liburing.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <eddy/io/detail/operation.hpp>
#include <eddy/runtime/detail/driver.hpp>
#include <eddy/runtime/detail/duration_recorder.hpp>
#include <eddy/runtime/detail/owned_counter.hpp>
#include <eddy/time/detail/timer.hpp>

namespace eddy::detail {

class PollState;
class TimerQueue;

/// IORING_OP_WAITID (Linux 6.7), which the headers of liburing 2.3 (Debian 12) lack: the
/// kernel's number, the one after IORING_OP_READ_MULTISHOT (49), which follows
/// IORING_OP_SENDMSG_ZC (48, checked in reactor_io.cpp). The SQE: fd = the id, len = the id
/// type, file_index = the options, addr2 = the siginfo_t, everything else zero.
inline constexpr int kOpWaitId = 50;

struct EpollState;
struct FdWatch;

class Reactor final : public Driver {
public:
    /// The readiness driver's constructor tag.
    struct ReadinessDriver {};
    /// Sets up the ring; std::system_error saying why when io_uring is unavailable.
    Reactor(DriverHost& host, unsigned ring_entries);
    /// The readiness driver (reactor_epoll.cpp): an epoll set instead of the ring. `note`:
    /// why (ReactorMetrics::driver_note), empty when it was asked for.
    Reactor(DriverHost& host, ReadinessDriver, std::string note);
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
    /// The runtime this reactor serves, as the driver sees it (eddy/runtime/detail/driver.hpp).
    DriverHost& host() const noexcept { return host_; }
    /// Worker `i`'s timer queue (timer_queue.hpp).
    TimerQueue& timer_queue(std::size_t i) noexcept { return *timer_queues_[i]; }
    /// A timer queue's root became `deadline_ns`: wakes the reactor if it sleeps past it.
    void timer_armed(std::int64_t deadline_ns) noexcept;
    void flush() noexcept override;
    bool worker_out_of_work(bool parked) noexcept override;
    void watch() noexcept override;
    void wake() noexcept override { wake_if_sleeping(); }
    ReactorMetrics metrics() const noexcept override;
    IoDriver kind() const noexcept override { return epoll_ != nullptr ? IoDriver::epoll : IoDriver::io_uring; }
    /// Whether the ring has IORING_OP_WAITID (probed once by the constructor; never with
    /// the readiness driver).
    bool has_waitid() const noexcept { return waitid_; }
    /// Whether this is the readiness driver (epoll) rather than io_uring.
    bool readiness() const noexcept { return epoll_ != nullptr; }

private:
    // user_data values that are not operations (operations are at least 8-aligned).
    static constexpr std::uint64_t kWakeTag = 1;         // the eventfd read
    static constexpr std::uint64_t kIgnoreTag = 2;       // ASYNC_CANCEL requests
    static constexpr std::uint64_t kLinkTimeoutTag = 3;  // a deadline's LINK_TIMEOUT (link_timeout.cpp)
    static constexpr std::uint64_t kPollBit = 4;         // op | kPollBit: a readiness poll for op
    static constexpr std::uint64_t kStateBit = 1;        // PollState | kStateBit: a socket's multishot poll
    // The longest sleep while a worker runs: bounds how long a batched post can wait.
    static constexpr std::int64_t kUnflushedBoundNs = 1'000'000;
    // While every worker runs, completions wait at most this long to be handed over together
    // (a worker that runs out of work ends the wait); while only some run, this much shorter.
    // Measured on the echo benchmark (1 and 2 workers, 8 alternating runs): 200 us and 50 us
    // gave the fewest context switches per round trip without a loss of throughput.
    static constexpr std::int64_t kBatchWindowNs = 200'000;
    static constexpr std::int64_t kPartialBatchWindowNs = 50'000;
    /// The batching sleep while a worker runs and nothing is in the ring: the watchdog's pace
    /// (runtime/watchdog.hpp). Waking every 50-200 us for it cost `timeouts` with 2 workers a
    /// quarter of its rate (the timer queues' cache lines bounced between the threads).
    static constexpr std::int64_t kIdleRingWatchNs = 1'000'000;

    void init_queues();  // both constructors: the timer queues and what the loop reserves
    void push(ReactorNode& node) noexcept;
    void wake_if_sleeping() noexcept;
    void run() noexcept;
    void take_inbox();
    void handle_node(ReactorNode* node);
    void start_io(IoOperation* op);
    void submit_poll(IoOperation* op);  // for readiness in the operation's direction
    void start_cancel(Operation* op);
    void reap();
    void handle_cqe(std::uint64_t user_data, std::int32_t res, std::uint32_t flags);
    void arm_poll(PollState* s);
    void link_armed(PollState* s) noexcept;  // onto armed_, the kernel holding its poll (both drivers)
    void cancel_poll(PollState* s);
    void poll_event(PollState* s, std::int32_t res, bool more);
    void fire_timers();
    std::int64_t earliest_timer() const noexcept;
    void complete(IoOperation* op, std::int32_t result);
    void flush_ready();
    void sleep_in_kernel();
    io_uring_sqe* next_sqe();
    void make_room();  // the SQ is full: hand it to the kernel
    // io/reactor/link_timeout.cpp: an operation under a deadline (see operation.hpp).
    io_uring_sqe* next_linked_sqe();  // the first of two adjacent SQEs
    void link_deadline(io_uring_sqe* sqe, IoOperation* op);
    static std::int32_t deadline_result(const IoOperation& op, std::int32_t res) noexcept;
    void arm_wake();
    void publish_gauges() noexcept;
    void sleep_batching(std::int64_t bound);
    // Virtual time (io/reactor/virtual_time.cpp; runtime/clock.hpp), when virtual_ is set.
    bool virtual_time(std::int64_t timer, bool batch, std::int64_t& bound);
    bool virtual_step();
    bool quiet() const;
    bool virtual_changed(std::int64_t timer, std::uint64_t requests) const noexcept;
    std::int64_t timer_now() const noexcept;
    void track(Operation* op) noexcept;
    void untrack(Operation* op) noexcept;
    void drain_for_shutdown() noexcept;
    void drop_inbox() noexcept;  // shutdown: what the inbox holds, dropped
    // The kernel, whichever driver: hand over what is queued and take what is done, without
    // sleeping (io_uring: submit and run deferred completions; epoll: nothing, reap() looks).
    void kernel_poll_now();
    // io/reactor/reactor_epoll.cpp and reactor_epoll_ops.cpp: the readiness driver's side of each step above.
    int epoll_register(int fd, FdWatch& w) noexcept;  // 0 or an errno
    void epoll_forget_if_unused(int fd) noexcept;
    void epoll_arm_poll(PollState* s);
    void epoll_cancel_poll(PollState* s);
    void epoll_end_poll(PollState* s, std::int32_t res);
    void epoll_start_io(IoOperation* op);
    void epoll_connect(IoOperation* op);
    void epoll_wait_ready(IoOperation* op);
    void epoll_unlink(IoOperation* op) noexcept;  // from its descriptor's waiters
    void epoll_to_pool(IoOperation* op);
    void epoll_pool_done(IoOperation* op, std::int32_t result);
    bool epoll_pool_returned(IoOperation* op);  // an inbox node: a pool call that ended?
    void epoll_cancel(Operation* op);
    void epoll_fire_deadlines();
    std::int64_t epoll_earliest_deadline() const noexcept;
    int epoll_collect(std::int64_t bound_ns);  // waits up to bound (-1: no bound); events handled
    void epoll_dispatch(std::uint64_t data, std::uint32_t events);
    void epoll_reap();
    void epoll_drain() noexcept;

    DriverHost& host_;
    io_uring ring_{};
    int event_fd_ = -1;
    bool disabled_ = false;  // the ring waits for the reactor thread to enable it
    bool waitid_ = false;    // the ring has IORING_OP_WAITID (Linux 6.7+); set up before start()
    const bool virtual_;     // the runtime's clock is virtual (runtime/clock.hpp)
    const bool time_io_;     // RuntimeConfig::io_latency_histogram: fill io_latency_
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
    std::vector<std::unique_ptr<TimerQueue>> timer_queues_;  // one per worker
    std::vector<TimeoutScope*> stops_;                       // with_timeouts that expired this round (a reference each)
    std::vector<void*> ready_;                               // frames to resume, pushed in bulk
    ReactorNode* retry_ = nullptr;                           // operations to resubmit (-EINTR, after a poll)
    Operation* in_flight_ = nullptr;                         // list of operations the kernel holds
    PollState* armed_ = nullptr;                             // list of sockets whose poll the kernel holds
    bool multishot_poll_ = true;                             // false once the kernel refused IORING_POLL_ADD_MULTI
    std::size_t pending_cqes_ = 0;                           // completions the kernel still owes us
    std::uint64_t wake_buf_ = 0;                             // the eventfd read's buffer
    bool wake_armed_ = false;

    // Statistics (eddy/runtime/metrics.hpp): written by the reactor thread only (gauges at
    // the end of each round), except stat_wakeups_, counted by whichever thread wakes it.
    OwnedCounter stat_operations_, stat_submissions_, stat_completions_, stat_timers_fired_;
    OwnedCounter stat_in_flight_, stat_polled_;
    std::size_t polled_ = 0;  // sockets on armed_
    std::atomic<std::uint64_t> stat_wakeups_{0};
    // I/O latency per IoOpKind (ReactorMetrics::io_latency), when time_io_: from an
    // operation's taken_ns to its completion. clock_ns_ is the reactor's last steady-clock read: taken once by
    // take_inbox() when the inbox holds anything and once per batch of CQEs that reap()
    // finds, so the stamps and the completions of one round share a read.
    DurationRecorder io_latency_[kIoOpKinds];
    std::int64_t clock_ns_ = 0;

    // The readiness driver's, at the end: the members above keep the places they have with
    // io_uring alone.
    std::unique_ptr<EpollState> epoll_;  // its state; null with io_uring
    std::size_t pooled_ = 0;             // calls on its file pool (reactor thread only)
    std::string driver_note_;            // ReactorMetrics::driver_note

    // Reactor thread only: expired timers' frames, and how late each fired (ns), pushed by
    // fire_timers itself, stamped from their deadlines (DriverHost::deliver_late). At the
    // end for the reason above: put after ready_, they moved the fields below it, and
    // spawn_remote ran 14 % slower (15 alternating runs, 1 and 2 workers).
    std::vector<void*> timer_ready_;
    std::vector<std::int64_t> timer_late_;
};

/// The reactor of the runtime whose worker runs the calling thread, or nullptr.
Reactor* this_thread_reactor() noexcept;

}  // namespace eddy::detail
