//! eddy/runtime/config.hpp: RuntimeConfig, how a Runtime is sized and wired.
//!
//! Every field has a default and an environment variable that RuntimeConfig::from_env() reads.
//! The Runtime constructor validates the fields: a value out of range throws
//! std::invalid_argument naming the field and the accepted range. from_env() throws the same
//! naming the variable, the rejected value and the accepted range.
//!
//! Precedence, in one sentence: the program's values win, and the environment is read in one
//! place only, RuntimeConfig::from_env(base), which applies the EDDY_* variables that are set
//! over `base`, so a Runtime built without from_env() reads no environment at all (Tokio: a
//! value given to the runtime Builder wins over TOKIO_WORKER_THREADS; Tokio does read that
//! variable when the Builder is given no worker count, eddy reads nothing unless asked).
//! A program that calls from_env() lets the operator override it; a value it sets on the
//! result afterwards wins again (a command-line flag over the environment):
//!
//!     eddy::Runtime rt;                                                    // defaults; no EDDY_* read
//!     eddy::Runtime rt(eddy::RuntimeConfig{.workers = 1});                 // 1, whatever EDDY_WORKERS says
//!     eddy::Runtime rt(eddy::RuntimeConfig::from_env());                  // defaults + EDDY_*
//!     eddy::Runtime rt(eddy::RuntimeConfig::from_env({.workers = 2, .thread_name_prefix = "svc"}));
//!                                                                          // EDDY_WORKERS, when set, over 2
//!     auto c = eddy::RuntimeConfig::from_env();
//!     if (flag) c.workers = *flag;                                         // --workers over EDDY_WORKERS
//! @file
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <eddy/runtime/io_driver.hpp>

namespace eddy {

/// Which task a task hook is about (RuntimeConfig::on_task_spawn, on_task_first_poll,
/// on_task_complete). Valid during the call only: copy the name to keep it.
struct TaskInfo {
    /// The task's identity while it lives (the address of its frame's header): two live
    /// tasks never share one, but a task spawned after another finished may get its id.
    std::uint64_t id = 0;
    /// The name given to spawn(task, name); empty when the task has none.
    std::string_view name{};
};

/// What happens to an exception that escapes a task nobody will observe (see
/// RuntimeConfig::unhandled_exception).
enum class UnhandledExceptionPolicy {
    log,        ///< one line on stderr ("eddy: exception escaped a detached task: <what()>")
    ignore,     ///< nothing
    terminate,  ///< the line on stderr, then std::terminate() (SIGABRT by default)
    callback,   ///< RuntimeConfig::on_unhandled_exception (required then)
};

/// Which clock a runtime's timers run on (RuntimeConfig::clock; eddy/runtime/time.hpp).
enum class ClockMode {
    real,    ///< std::chrono::steady_clock
    paused,  ///< virtual, moved by advance() and by auto-advance when the runtime is idle (Tokio's start_paused)
    manual,  ///< virtual, moved by advance() only
};

/// A slow poll, as RuntimeConfig::on_slow_poll_detail reports it (on the reactor thread,
/// while the poll runs). The views are valid during the call only.
struct SlowPoll {
    std::size_t worker = 0;               ///< the worker's index
    std::chrono::nanoseconds running{0};  ///< how long the poll has run so far
    std::string_view task_name;           ///< the spawn name of the task it runs for (at most 64 bytes), else empty
    std::string_view file;                ///< the await site it resumed at: the co_await's file, else empty
    std::uint32_t line = 0;               ///< and line (0: unknown)
    /// and the function it is in: GCC's full signature ("eddy::Task<void> serve(int)"),
    /// Clang's bare name ("serve"); empty when the file is
    std::string_view function;
};


/// How a Runtime is sized and wired. Aggregate: set the fields you want
/// (`RuntimeConfig{.workers = 2}`), the rest keep their defaults. The Runtime constructor
/// validates it (std::invalid_argument naming the field and the accepted range); only
/// from_env() reads the environment.
struct RuntimeConfig {
    /// Worker threads, 1..1024. Unset: the CPUs this process may use (affinity mask and
    /// cgroup CPU quota respected). EDDY_WORKERS (through from_env() only, see above).
    std::optional<std::size_t> workers{};

    /// Submission queue entries of the reactor's io_uring ring, 1..32768 (rounded up to a
    /// power of two by the kernel; the completion queue gets four times as many). More
    /// operations than this may be in flight: a full queue is submitted and refilled.
    /// Default 1024; EDDY_RING_ENTRIES.
    unsigned ring_entries = 1024;

    /// The reactor's kernel interface: `automatic` (the default: io_uring, else the readiness
    /// driver where the kernel refuses io_uring), `io_uring` or `epoll` (see IoDriver).
    /// EDDY_DRIVER=auto|io_uring|epoll.
    IoDriver driver = IoDriver::automatic;

    /// Thread names: "<prefix>-worker-N" and "<prefix>-reactor", cut to the 15 bytes Linux
    /// keeps (what `top -H`, `ps -L` and `/proc/<pid>/task/*/comm` show): a name stays whole
    /// while the prefix's length + 8 + the digits of the worker's index is at most 15 ("eddy"
    /// keeps eddy-worker-0 to eddy-worker-999 whole). Not empty. Default "eddy";
    /// EDDY_THREAD_NAME.
    std::string thread_name_prefix = "eddy";

    /// Pin worker i to the (i mod n)-th of the n CPUs in the affinity mask of the thread that
    /// constructs the Runtime (round robin). The reactor thread is not pinned. Default false;
    /// EDDY_PIN_WORKERS=0|1|true|false.
    bool pin_workers = false;

    /// A busy worker takes its next task from the global queue (else the oldest task of its
    /// own deque) every this many turns, so that nothing starves behind a hot LIFO end.
    /// 1..1000000; default 61 (Tokio's, a prime); EDDY_GLOBAL_QUEUE_INTERVAL.
    std::uint32_t global_queue_interval = 61;

    /// Stack size of each worker thread in bytes (at least this; rounded up to whole pages),
    /// 64 KiB..1 GiB; 0 (the default) keeps the system's (RLIMIT_STACK, usually 8 MiB). Deep
    /// recursion inside tasks and synchronously completing await chains run on it.
    /// EDDY_STACK_SIZE: bytes, or a number with a K, M or G suffix (binary: 256K = 262144).
    std::size_t stack_size = 0;

    /// on_thread_start and on_thread_stop run on every thread the runtime starts: the
    /// workers, the reactor, the blocking threads (spawn_blocking) and the epoll driver's
    /// file threads ("<prefix>-io"): on_thread_start once the thread is named and before it
    /// does any work, on_thread_stop as the thread's last act (the workers' at shutdown, the
    /// reactor's after them). Must not throw: an exception is reported on stderr and ignored. Unset: nothing.
    std::function<void()> on_thread_start{};
    std::function<void()> on_thread_stop{};  ///< see on_thread_start

    /// What happens to an exception that escaped a task nobody will observe: a detached task
    /// (its JoinHandle dropped before it finished), or a finished task whose JoinHandle was
    /// dropped without being awaited. Unset: `callback` if on_unhandled_exception is set,
    /// else `log`. EDDY_UNHANDLED=log|ignore|terminate.
    std::optional<UnhandledExceptionPolicy> unhandled_exception{};

    /// The `callback` policy: called on the thread that finished the task (or dropped its
    /// handle) with the exception. Must not throw (an exception from it is reported on stderr
    /// with the original one).
    std::function<void(std::exception_ptr)> on_unhandled_exception{};

    /// The blocking pool (eddy::spawn_blocking): at most this many threads, started on
    /// demand; more calls wait in a FIFO queue. 1..100000; default 512 (Tokio's);
    /// EDDY_MAX_BLOCKING_THREADS.
    std::size_t max_blocking_threads = 512;

    /// A blocking thread with nothing to do for this long exits. 1 ms..1 day; default 10 s
    /// (Tokio's); EDDY_BLOCKING_KEEP_ALIVE_MS.
    std::chrono::milliseconds blocking_keep_alive{10'000};

    /// Shutdown waits this long for blocking calls that are running (calls still queued are
    /// dropped), then reports on stderr how many it left running and goes on; those finish
    /// on their own and resume nothing. 0..1 day; default 10 s (Tokio waits forever by
    /// default: a service that must stop should not hang on a stuck call);
    /// EDDY_BLOCKING_SHUTDOWN_TIMEOUT_MS.
    std::chrono::milliseconds blocking_shutdown_timeout{10'000};

    /// The long-poll detector: a task that runs this long on a worker without suspending is
    /// counted (WorkerMetrics::slow_polls) and reported once, while it still runs, through
    /// on_slow_poll. It is noticed by the reactor thread, which looks at the workers every
    /// 0.2 ms (1 ms when it has no I/O in flight) while any of them runs, so a report comes
    /// at most that much later than the threshold, never earlier. 0 (the default) turns reports off (the
    /// looking itself is always on: it also frees a LIFO slot held by a long poll).
    /// 0..3600000 ms; EDDY_SLOW_POLL_MS (milliseconds).
    std::chrono::milliseconds slow_poll_threshold{0};

    /// Called on the reactor thread with the worker's index and how long the task has run so
    /// far. Keep it short, and it must not throw (an exception is reported on stderr and
    /// ignored). Unset: one line on stderr, "eddy: worker N has run one task for X ms
    /// without suspending (slow_poll_threshold Y ms)".
    std::function<void(std::size_t worker, std::chrono::nanoseconds running)> on_slow_poll{};
    /// The same report with the task, when set (on_slow_poll is then not called): a
    /// SlowPoll with the worker, the time so far, the resumed task's name and the await site
    /// (file, line, function) the poll resumed at. The name and site are filled only in builds with task-dump
    /// records (the meson option task_dump, EDDY_TASK_DUMP); elsewhere they are empty. The
    /// name is that of a named spawned task (or TaskGroup member) resumed by the poll itself;
    /// a poll that resumes a child the task awaits names no task (the child has no name),
    /// but its site is the child's co_await. Unset with on_slow_poll unset too: the stderr
    /// line names the task and site when known.
    std::function<void(const SlowPoll& poll)> on_slow_poll_detail{};

    /// Task hooks (observability: docs/guide/11-operating.md, "Observability"), for root
    /// tasks (eddy::spawn, Runtime::spawn, block_on). on_task_spawn runs on the spawning
    /// thread before the task can run; on_task_first_poll on the worker that polls it first,
    /// just before that poll (and before its on_poll_start); on_task_complete on the thread
    /// that finishes it, as it finishes (not for tasks destroyed unfinished by shutdown).
    /// Keep them short, they run inline; they must not throw (an exception is reported on
    /// stderr and ignored). Unset (the default): the scheduler does nothing for them, not even
    /// a clock read. A Runtime is constructed with its hooks; they cannot be changed later.
    std::function<void(const TaskInfo&)> on_task_spawn{};
    std::function<void(const TaskInfo&)> on_task_first_poll{};  ///< see on_task_spawn
    std::function<void(const TaskInfo&)> on_task_complete{};    ///< see on_task_spawn

    /// Poll hooks, on the worker (its index) around every poll: one resumption of a queued
    /// frame or I/O retry, which runs until the frame suspends (WorkerMetrics::tasks_polled
    /// counts them). A poll resumes the innermost suspended frame, which does not know its
    /// root task, so these carry the worker, not a TaskInfo. Same rules as on_task_spawn.
    std::function<void(std::size_t worker)> on_poll_start{};
    std::function<void(std::size_t worker)> on_poll_end{};  ///< see on_poll_start

    /// Time every poll into WorkerMetrics::poll_time: two reads of the scheduling clock per
    /// poll (about 20 ns each here). Off by default: it costs more than 2 % on the
    /// scheduler's yield benchmark. EDDY_POLL_TIME_HISTOGRAM=0|1|true|false.
    bool poll_time_histogram = false;
    /// Time every reactor I/O operation into ReactorMetrics::io_latency (per IoOpKind, from
    /// the reactor's taking it to its completion; socket stream reads and writes are not
    /// reactor operations and are not timed). One steady-clock read per reactor round that
    /// takes operations and one per batch of completions, shared by all of them, and a
    /// histogram update per operation. Off by default: pipe reads through the ring
    /// (benchmarks/deadline_ops) measured 2-6 % slower with it, within a noisy machine's
    /// spread but not clearly under 2 %. EDDY_IO_LATENCY_HISTOGRAM=0|1|true|false.
    bool io_latency_histogram = false;

    /// The clock of sleeps, timeouts and intervals (eddy/runtime/time.hpp): `real` (the
    /// default), or a virtual one for tests, `paused` (jumps to the next timer whenever the
    /// runtime is idle) or `manual` (moves by eddy::time::advance / Runtime::advance only).
    /// EDDY_CLOCK=real|paused|manual.
    ClockMode clock = ClockMode::real;

    /// `base` with every EDDY_* variable that is set applied over it: EDDY_WORKERS,
    /// EDDY_RING_ENTRIES, EDDY_THREAD_NAME, EDDY_PIN_WORKERS, EDDY_GLOBAL_QUEUE_INTERVAL,
    /// EDDY_STACK_SIZE, EDDY_UNHANDLED, EDDY_SLOW_POLL_MS, EDDY_MAX_BLOCKING_THREADS,
    /// EDDY_BLOCKING_KEEP_ALIVE_MS, EDDY_BLOCKING_SHUTDOWN_TIMEOUT_MS, EDDY_CLOCK,
    /// EDDY_POLL_TIME_HISTOGRAM, EDDY_DRIVER. A set but bad value (empty, not a number, out of
    /// range, an unknown suffix or word) throws std::invalid_argument naming the variable,
    /// the value and what is accepted.
    static RuntimeConfig from_env(RuntimeConfig base);
    /// from_env(RuntimeConfig{}): the defaults with the EDDY_* variables that are set.
    static RuntimeConfig from_env() { return from_env(RuntimeConfig{}); }

    /// The bounds the Runtime constructor checks, for programs that check or clamp their own
    /// flags against them (each field's documentation gives its range).
    /// @{
    static constexpr std::size_t kMaxWorkers = 1024;
    static constexpr unsigned kMaxRingEntries = 32768;
    static constexpr std::uint32_t kMaxGlobalQueueInterval = 1'000'000;
    static constexpr std::size_t kMinStackSize = std::size_t{64} << 10;
    static constexpr std::size_t kMaxStackSize = std::size_t{1} << 30;
    static constexpr std::chrono::milliseconds kMaxSlowPollThreshold{3'600'000};
    static constexpr std::size_t kMaxBlockingThreads = 100'000;
    static constexpr std::chrono::milliseconds kMaxBlockingKeepAlive{86'400'000};
    static constexpr std::chrono::milliseconds kMaxBlockingShutdownTimeout{86'400'000};
    /// @}
};

}  // namespace eddy
