//! eddy/runtime/metrics.hpp: RuntimeMetrics, a snapshot of what a Runtime has been doing.
//!
//!     eddy::RuntimeMetrics m = rt.metrics();   // any thread, any time, cheap
//!     std::printf("%s", m.to_string().c_str());
//!
//! Counters (monotonic since the Runtime started) and gauges (a value at the moment of the
//! snapshot). Each is written by one thread only (its worker, or the reactor thread) with a
//! relaxed store and read here with a relaxed load: counting costs an add on the hot path, no
//! atomic read-modify-write and no shared cache line, and a snapshot is not taken atomically
//! as a whole: figures of different threads may be a few operations apart. Once the runtime is
//! quiescent (every spawned task finished, nothing queued), they add up exactly:
//!     tasks_spawned == tasks_completed + tasks_alive      (and tasks_alive == 0)
//!     sum of tasks_stolen over workers == tasks the other workers lost to steals
//! Prometheus: `m.to_prometheus()` renders a snapshot in the text exposition format, for a
//! `/metrics` endpoint (examples/service.cpp serves one). Histograms: the scheduling delay
//! (always on) and the poll time (RuntimeConfig::poll_time_histogram), per worker; the
//! latency of the reactor's I/O operations per kind (ReactorMetrics::io_latency, with
//! RuntimeConfig::io_latency_histogram;
//! socket stream reads and writes are not reactor operations and are not timed). Hooks
//! around spawns, polls and completions are RuntimeConfig's on_task_* and on_poll_* (see
//! docs/guide/11-operating.md, "Observability").
//! "Tasks" in the spawn figures are root tasks (eddy::spawn, Runtime::spawn, block_on);
//! tasks_polled counts every resumption of every frame (awaited children, when_all/when_any
//! children and TaskGroup members included).
//! @file
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <eddy/runtime/histogram.hpp>
#include <eddy/runtime/io_driver.hpp>

namespace eddy {

/// What one worker did, for RuntimeMetrics::workers. Counters count since the runtime
/// started; a gauge is the value when Runtime::metrics() read it.
struct WorkerMetrics {
    std::uint64_t tasks_polled = 0;        ///< frames resumed by this worker
    std::uint64_t tasks_spawned = 0;       ///< root tasks spawned from this worker
    std::uint64_t tasks_completed = 0;     ///< root tasks that finished on this worker
    std::uint64_t steal_attempts = 0;      ///< looks into another worker's deque
    std::uint64_t steals = 0;              ///< looks that took something
    std::uint64_t tasks_stolen = 0;        ///< tasks those steals took (half a deque at a time)
    std::uint64_t global_queue_takes = 0;  ///< tasks taken from the global queue
    std::uint64_t parks = 0;               ///< times the worker went to sleep
    std::uint64_t unparks = 0;             ///< times it was woken to look for work
    std::uint64_t overflows = 0;           ///< times its full deque moved half to the global queue
    std::uint64_t tasks_overflowed = 0;    ///< tasks moved that way
    std::uint64_t budget_yields = 0;       ///< tasks made to yield by the cooperative budget (coop.hpp)
    std::uint64_t slow_polls = 0;          ///< polls that ran past RuntimeConfig::slow_poll_threshold
    std::size_t local_queue_depth = 0;     ///< gauge: tasks in its queues now (wake queue and spawn deque)
    /// How long the tasks woken onto this worker's queues waited before it polled them (from
    /// the wake-up, a timer's deadline, or the moment a task left the LIFO slot, to the poll;
    /// tasks that ran straight from the slot are not counted). Always on: one clock read per
    /// timed task.
    DurationHistogram scheduling_delay;
    /// How long each poll ran on this worker (from the resumption of a queued frame to its
    /// suspension). Only with RuntimeConfig::poll_time_histogram (two clock reads per poll);
    /// empty otherwise.
    DurationHistogram poll_time;
};

/// The groups of reactor operations whose latency ReactorMetrics::io_latency reports, by
/// what a service operator asks about: "are file reads slow?", "is the disk's fsync slow?".
enum class IoOpKind : std::uint8_t {
    read,     ///< file and pipe reads (eddy::io::read, fs::File::read, vectored reads)
    write,    ///< file and pipe writes (vectored ones included)
    recv,     ///< recv and recvmsg handed to the ring (UDP datagrams)
    send,     ///< send and sendmsg handed to the ring
    accept,   ///< accepts
    connect,  ///< connects
    fs,       ///< open, statx, rename, unlink, mkdir: path operations (eddy/fs)
    fsync,    ///< fsync and fdatasync: the disk's flushes, apart from the rest
    poll,     ///< one-shot readiness waits (how long a descriptor took to become ready)
};
/// How many IoOpKinds there are: the size of ReactorMetrics::io_latency.
inline constexpr std::size_t kIoOpKinds = 9;
/// The kind's name, as the `op` label of the Prometheus histogram: "read", "fs", ...
std::string_view to_string(IoOpKind kind) noexcept;

/// What the reactor thread did (the io_uring ring). Counters since the runtime started;
/// gauges as read.
struct ReactorMetrics {
    /// The kernel interface in use: IoDriver::io_uring or IoDriver::epoll (never automatic).
    IoDriver driver = IoDriver::io_uring;
    /// Why the driver is not the one asked for: with RuntimeConfig::driver `automatic` and
    /// io_uring refused, the reason ("io_uring is unavailable: permission denied (...)");
    /// else empty.
    std::string driver_note;
    std::uint64_t operations = 0;    ///< I/O operations handed to the reactor (not sockets' reads and writes)
    std::uint64_t submissions = 0;   ///< SQEs submitted to the kernel (operations, polls, cancels, wake-up reads)
    std::uint64_t completions = 0;   ///< CQEs reaped
    std::uint64_t timers_fired = 0;  ///< sleeps that reached their deadline
    std::uint64_t wakeups = 0;       ///< times a worker woke the sleeping reactor (eventfd writes)
    std::size_t in_flight = 0;       ///< gauge: completions the kernel still owes (operations, socket polls)
    std::size_t timers_armed = 0;    ///< gauge: sleeps and with_timeouts waiting for their deadline
    std::size_t sockets_polled = 0;  ///< gauge: sockets with a multishot poll in the ring (one each)
    /// The latency of the operations handed to the reactor, per IoOpKind (index by
    /// `static_cast<std::size_t>(kind)`, or latency(kind)): from the moment the reactor takes
    /// the operation from its inbox (it is submitted to the kernel in the same round) to the
    /// moment it reaps the completion, retries after -EAGAIN or -EINTR included, whatever the
    /// result (errors and cancellations count too). Not timed: the time the operation waited
    /// in the inbox for its worker's flush (at most the batching window, reactor.hpp), and
    /// the resumption of the task afterwards (that is the scheduling delay). Not timed either,
    /// because they are no reactor operations: socket reads and writes on TCP and Unix
    /// streams (TcpStream, UnixStream), which wait for readiness through the socket's
    /// multishot poll and then call the syscall on the worker; nor a child process's wait
    /// (eddy::process::Child::wait), which lasts as long as the child runs. Only with
    /// RuntimeConfig::io_latency_histogram (empty otherwise): one clock read per reactor
    /// round that takes operations and one per batch of completions, shared by all of them.
    DurationHistogram io_latency[kIoOpKinds];
    /// io_latency of one kind.
    const DurationHistogram& latency(IoOpKind kind) const noexcept {
        return io_latency[static_cast<std::size_t>(kind)];
    }
};

/// A snapshot of a runtime's counters and gauges: Runtime::metrics(). Each figure is read
/// on its own, without stopping the runtime: they add up exactly only once it is quiescent.
struct RuntimeMetrics {
    std::vector<WorkerMetrics> workers;  ///< One per worker, in worker index order.
    ReactorMetrics reactor;              ///< The reactor thread's figures.
    std::size_t global_queue_depth = 0;  ///< gauge (approximate: the queue is lock-free)
    std::uint64_t tasks_spawned = 0;     ///< root tasks, from workers and from other threads
    std::uint64_t tasks_completed = 0;   ///< root tasks that finished
    std::uint64_t tasks_alive = 0;       ///< spawned, not finished, not destroyed by shutdown
    // The blocking pool (eddy::spawn_blocking).
    std::size_t blocking_threads = 0;         ///< gauge: threads alive
    std::size_t blocking_idle = 0;            ///< gauge: of those, waiting for a call
    std::size_t blocking_queued = 0;          ///< gauge: calls waiting for a thread
    std::uint64_t blocking_calls = 0;         ///< calls that have run
    std::uint64_t blocking_left_running = 0;  ///< calls still running when shutdown stopped waiting

    /// The whole runtime's scheduling delay: the sum of the workers' histograms.
    DurationHistogram scheduling_delay() const noexcept {
        DurationHistogram all;
        for (const WorkerMetrics& w : workers) all += w.scheduling_delay;
        return all;
    }
    /// The sum over workers of one figure, e.g. `m.total(&WorkerMetrics::steals)`.
    std::uint64_t total(std::uint64_t WorkerMetrics::*figure) const noexcept {
        std::uint64_t sum = 0;
        for (const WorkerMetrics& w : workers) sum += w.*figure;
        return sum;
    }
    /// A human-readable multi-line rendering (one line for the runtime, one per worker, one
    /// for the reactor, one for the I/O latencies when any were timed, one for the blocking
    /// pool), for logs and SIGUSR1 handlers.
    std::string to_string() const;
    /// The Prometheus text exposition format (0.0.4), every figure under `prefix`_ (a valid
    /// metric name prefix: letters, digits, '_' and ':', not starting with a digit, else
    /// std::invalid_argument): counters as `<prefix>_<name>_total`, gauges, per-worker figures
    /// with a `worker="N"` label, histograms in seconds as cumulative `_bucket{le="..."}`
    /// series (one per power of two) with `_sum` and `_count`. Serve it with the content type
    /// `text/plain; version=0.0.4`.
    std::string to_prometheus(std::string_view prefix = "eddy") const;
};

}  // namespace eddy
