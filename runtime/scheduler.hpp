// runtime/scheduler.hpp: the state a Runtime's workers share, and its shutdown protocol.
//
// # Shutdown, step by step (shutdown())
//   1. Close the injection door: set kClosed in external_ and wait until no spawn from a
//      non-worker thread is between its check and its push. Later external spawns throw
//      RuntimeStopped. (Worker threads spawn without the check: their tasks land in their
//      own deques and are handled by step 4.)
//   (shutdown_gracefully, drain.cpp, runs the drain here: the workers go on until the
//   registry is empty or the deadline passes; then the remaining abortable tasks get a stop
//   request and a bounded grace to unwind. Local spawns are still accepted meanwhile.)
//   2. Set stopping_, unpark every worker, join every thread. A running task finishes its
//      current step; no worker resumes anything afterwards. Then shut the I/O driver down:
//      it cancels every operation in flight and waits for the kernel's completions, so no
//      buffer in a frame is still in the kernel's hands when step 4 destroys the frame.
//      Then close the blocking pool: queued calls are dropped, running ones get
//      blocking_shutdown_timeout to end, and from then on no call resumes anything
//      (blocking_pool.hpp).
//   3. Forget every queued frame (deques, yield lists, global queue) without destroying it:
//      each one belongs to a task in the registry, destroyed next.
//   4. Destroy every registered (unfinished) task, marking it kComplete|kCancelled first so
//      that its JoinHandle, if any, reports RuntimeStopped. A block_on caller waiting for
//      it is woken, and so is a task of another runtime that awaits its JoinHandle (queued
//      on its own runtime: see "Joins across runtimes" in frame_header.hpp). A task of this
//      runtime that awaits a task of another one withdraws from that join as its frame is
//      destroyed, waiting if that task's completer is handing it over right then. Destroying a
//      frame destroys what it owns: its awaited child tasks, when_all children, and
//      JoinHandles, which detach their tasks (destroyed in turn).
// Steps 3 and 4 run with no worker alive, so no frame can be resumed while it is destroyed.
//
// # Who sees this header
// The scheduler is not a hub: each subsystem gets what it works on when the scheduler builds
// it, and includes nothing of the scheduler. The watchdog gets the config, its workers and a
// way to wake one; the worker pause the stop flag and the parkers; the blocking pool and the
// clock their settings; the I/O driver its DriverHost (eddy/runtime/detail/driver.hpp). What
// includes this header: the workers (worker.cpp, the scheduler's own threads), and the entry
// points that find a runtime from a thread or a Runtime object (runtime.cpp, time_api.cpp,
// task_dump.cpp, driver_host.cpp).
#pragma once

#include "private.hpp"
#include "blocking_pool.hpp"
#include "clock.hpp"
#include "idle.hpp"
#include "inject_queue.hpp"
#include "task_registry.hpp"
#include "worker_pause.hpp"
#include "watchdog.hpp"
#include "worker.hpp"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <eddy/runtime/config.hpp>
#include <eddy/runtime/detail/driver.hpp>
#include <eddy/tasks/detail/promise.hpp>

namespace eddy {
class Runtime;
struct ShutdownReport;
}  // namespace eddy

namespace eddy::detail {

class Scheduler {
public:
    Scheduler(std::size_t workers, RuntimeConfig config);
    ~Scheduler();
    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;

    /// Starts the driver and the worker threads, with the configured names, stack size and
    /// CPU pinning (std::system_error if one cannot start; nothing is left running).
    void start();
    /// Installs the I/O driver (before start()).
    void set_driver(std::unique_ptr<Driver> driver) noexcept { driver_ = std::move(driver); }
    Driver* driver() const noexcept { return driver_.get(); }
    /// The Runtime that owns this scheduler (before start(): the threads it starts see it).
    /// Runtime::current() reads it on a worker, and on a blocking thread through the pool.
    void set_runtime(Runtime* owner) noexcept {
        runtime_ = owner;
        blocking_.set_runtime(owner);
    }
    Runtime* runtime() const noexcept { return runtime_; }
    /// The configuration this runtime was built with (validated; any thread).
    const RuntimeConfig& config() const noexcept { return config_; }
    /// Worker thread: hands the driver what this worker posted since the last flush.
    void flush_driver() noexcept {
        if (driver_) driver_->flush();
    }
    /// Worker thread that found no work: see Driver::worker_out_of_work.
    bool driver_out_of_work(bool parked) noexcept { return driver_ && driver_->worker_out_of_work(parked); }
    /// Whether the driver sleeps without looking at the workers (it went to sleep with every
    /// worker parked). Workers load it seq_cst, like its store by the driver
    /// (set_unwatched): see Worker::schedule_next for the pairing.
    const std::atomic<bool>& unwatched_flag() const noexcept { return unwatched_; }
    void set_unwatched(bool v) noexcept { unwatched_.store(v, std::memory_order_seq_cst); }
    /// Any thread: wakes the driver if it sleeps (an advance() was requested).
    void wake_driver() noexcept {
        if (driver_) driver_->wake();
    }
    /// The clock of this runtime's timers (clock.hpp).
    RuntimeClock& clock() noexcept { return clock_; }
    /// Worker thread: see Driver::watch.
    void driver_watch() noexcept {
        if (driver_) driver_->watch();
    }
    /// See the protocol above. Idempotent; WrongThread from one of this runtime's workers.
    void shutdown();
    /// Runtime::shutdown_gracefully (drain.cpp): step 1, the drain, then steps 2-4.
    ShutdownReport shutdown_gracefully(std::chrono::nanoseconds deadline, std::chrono::nanoseconds grace);

    /// Registers and queues a root task (see spawn_root in scheduler_api.hpp).
    void spawn(PromiseBase& p, std::coroutine_handle<> frame);
    /// Queues a suspended frame to be resumed, from any thread.
    void schedule(std::coroutine_handle<> frame) noexcept { schedule_item(frame.address()); }
    /// The same for any queue item: a frame's address or a tagged Runnable (scheduler_api.hpp).
    void schedule_item(void* item) noexcept;
    /// The driver's thread (DriverHost::deliver): queues `n` frames woken now on the global
    /// wake queue with one bulk push (the driver's own producer token) and wakes a worker if
    /// none is searching.
    void deliver_from_driver(void* const* frames, std::size_t n) noexcept;
    /// The same for expired timers: frame i became runnable late_ns[i] ago (DriverHost::deliver_late).
    void deliver_late_from_driver(void* const* frames, const std::int64_t* late_ns, std::size_t n) noexcept;
    /// What the driver sees of this scheduler (driver.hpp): handed to make_driver().
    DriverHost& driver_host() noexcept { return driver_host_; }
    /// idle.hpp rule 1: wakes one parked worker if new work needs one.
    void notify_parked() noexcept;
    /// idle.hpp rule 4: the last searcher's final look at every queue.
    void notify_if_work_pending() noexcept;

    /// Any thread: a snapshot of every worker's, the driver's and the scheduler's figures.
    RuntimeMetrics metrics() const;

    /// Applies RuntimeConfig's unhandled-exception policy to `e`.
    void report_unhandled(const std::exception_ptr& e) noexcept;
    /// The same for a JoinHandle dropped anywhere, possibly after its runtime is gone.
    static void report_unobserved(std::uint64_t scheduler_id, const std::exception_ptr& e) noexcept;

    /// The completion hook of every root task (the join protocol of frame_header.hpp).
    static std::coroutine_handle<> finish_root(void* ctx, PromiseBase& p, std::coroutine_handle<> self) noexcept;

    /// This runtime's id: FrameHeader::home_id of its root tasks.
    std::uint64_t id() const noexcept { return id_; }
    bool stopping() const noexcept { return stopping_.load(std::memory_order_relaxed); }
    /// Tasks spawned from outside the runtime so far (relaxed: a hint for spinning workers).
    std::uint64_t external_spawns() const noexcept { return external_spawned_.load(std::memory_order_relaxed); }
    std::size_t num_workers() const noexcept { return workers_.size(); }
    Worker& worker(std::size_t i) noexcept { return *workers_[i]; }
    /// The global queues (inject_queue.hpp): woken tasks (the reactor's completions, wake-ups
    /// from other threads, wake queues' overflow), and spawned ones (spawns from other
    /// threads, spawn deques' overflow). Kept apart as the workers' own queues are
    /// (worker.hpp): woken tasks run oldest first, spawned ones depth first.
    InjectQueue& global_wakes() noexcept { return global_wakes_; }
    SpawnQueue& global_spawns() noexcept { return global_spawns_; }
    /// Moves after every push to the global wake queue: workers look at it every turn and,
    /// when it moved, take from that queue before their own (worker.hpp, "Input first").
    /// Release after the push, acquire by the workers: a worker that sees it move finds the
    /// items there. Whoever pushes to the global wake queue calls note_global_wakes().
    std::uint64_t global_wake_pushes() const noexcept { return wake_pushes_.load(std::memory_order_acquire); }
    void note_global_wakes() noexcept { wake_pushes_.fetch_add(1, std::memory_order_release); }
    /// Tasks in both (an estimate).
    std::size_t global_depth() const { return global_wakes_.size_approx() + global_spawns_.size_approx(); }
    Idle& idle() noexcept { return idle_; }
    TaskRegistry& registry() noexcept { return registry_; }
    /// The driver's thread calls its check() while workers run (watchdog.hpp).
    Watchdog& watchdog() noexcept { return *watchdog_; }
    /// The threads of eddy::spawn_blocking (blocking_pool.hpp).
    BlockingPool& blocking() noexcept { return blocking_; }
    /// Task dumps stop the workers through it (worker_pause.hpp).
    WorkerPause& pause() noexcept { return pause_; }

private:
    static constexpr std::uint64_t kClosed = std::uint64_t{1} << 63;

    void cancel(FrameHeader* h) noexcept;
    /// A spawn with a task hook set: calls on_task_spawn; returns the item to queue (tagged
    /// for on_task_first_poll).
    void* note_spawn(FrameHeader* h, void* item);
    /// Step 1 of the protocol.
    void close_door() noexcept;
    /// Steps 2 to 4; returns how many tasks step 4 destroyed.
    std::size_t stop_and_destroy();
    /// Root tasks finished so far (the workers' and foreign completions; relaxed).
    std::uint64_t completed_so_far() const noexcept;

    const RuntimeConfig config_;
    // on_task_spawn or on_task_first_poll set: spawn() calls note_spawn.
    const bool task_hooks_ = config_.on_task_spawn || config_.on_task_first_poll;
    const std::uint64_t id_;
    Runtime* runtime_ = nullptr;                      // set before start(): never changes while a thread runs
    const FinishHook root_hook_{&finish_root, this};  // every root task's completion
    InjectQueue global_wakes_;
    SpawnQueue global_spawns_;
    InjectQueue::ProducerToken driver_token_{global_wakes_};  // the driver's thread only
    DriverHost driver_host_{*this};
    Idle idle_;
    TaskRegistry registry_;
    std::vector<std::unique_ptr<Worker>> workers_;
    std::unique_ptr<Watchdog> watchdog_;  // made after the workers
    BlockingPool blocking_;
    std::unique_ptr<Driver> driver_;
    std::vector<pthread_t> threads_;  // the workers: started by start(), joined by shutdown()
    // Stop flag for the run loops. Relaxed is enough: it only asks a worker to leave; the
    // join in shutdown() is what orders everything after.
    std::atomic<bool> stopping_{false};
    WorkerPause pause_;
    // Written by the driver's thread when it sleeps and wakes; read by workers when they fill
    // an empty LIFO slot (rarely written: it stays in their caches).
    alignas(64) std::atomic<bool> unwatched_{false};
    // kClosed | number of external spawns between their check and their push (step 1).
    // Its own cache line, with external_spawned_: outside spawners update both per spawn,
    // and stopping_, which every worker reads every turn, must not share their line (it did
    // by accident of layout once: spawn_remote at 0.85x).
    alignas(64) std::atomic<std::uint64_t> external_{0};
    // Statistics that have no single owning worker (see metrics.hpp): spawns from outside the
    // runtime, completions off its workers (none expected), tasks destroyed by shutdown.
    // Relaxed read-modify-writes: these paths are not hot.
    std::atomic<std::uint64_t> external_spawned_{0};  // with external_: see there
    alignas(64) std::atomic<std::uint64_t> foreign_completed_{0};
    std::atomic<std::uint64_t> destroyed_{0};
    std::mutex shutdown_mutex_;
    bool shut_down_ = false;  // guarded by shutdown_mutex_
    // Written by the reactor at each batch it delivers, read by every worker every turn.
    alignas(64) std::atomic<std::uint64_t> wake_pushes_{0};
    // Last, on lines of its own: cold on a real clock (the hot fields above keep their layout).
    alignas(64) RuntimeClock clock_;
};

}  // namespace eddy::detail
