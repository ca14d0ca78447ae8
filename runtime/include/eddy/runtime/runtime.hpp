//! eddy/runtime/runtime.hpp: Runtime, a pool of worker threads that runs tasks.
//!
//! Shape: N workers, each with a bounded work-stealing deque, plus one global injection
//! queue. A task spawned on a worker goes to that worker's deque; one spawned from outside
//! goes to the injection queue. Idle workers steal half of a busy worker's deque, and park
//! when there is nothing to do; new work wakes at most one of them.
//!
//!     eddy::Runtime rt(eddy::RuntimeConfig{.workers = 4});
//!     int answer = rt.block_on(compute());          // from main(), not from a task
//!     auto handle = rt.spawn(background());         // from any thread
//!
//! Shutdown (`shutdown()` or the destructor): refuses new spawns, stops and joins the workers
//! (a task that is running finishes its current step; nothing else runs afterwards), then
//! destroys every task that did not finish, so their locals are released. Handles to such
//! tasks throw eddy::RuntimeStopped when awaited. Calling shutdown from one of the runtime's
//! own workers throws eddy::WrongThread (it would join itself); the destructor must likewise
//! not run on a worker.
//!
//! Graceful shutdown (`shutdown_gracefully(deadline)`): the same end, reached by a drain.
//! Spawns from outside the runtime are refused at once (RuntimeStopped), but the workers go
//! on, so running tasks finish what they are doing, and may spawn children to do it (a spawn
//! from a task of this runtime is accepted until the workers stop, as in Tokio: a drain that
//! refused it would break a request half-way). When every task has finished, or the deadline passes,
//! what is left is cancelled: every remaining abortable task (spawn_abortable, JoinSet,
//! TaskTracker members, and through them their awaited children and TaskGroups) gets a stop
//! request, so its pending await throws eddy::OperationCancelled and it unwinds; after a short
//! bounded grace, the rest (plain spawns are uncancellable: eddy/tasks/cancellation.hpp) is
//! destroyed as by shutdown(). The returned ShutdownReport says how many tasks finished and
//! which were cancelled:
//!
//!     eddy::ShutdownReport r = rt.shutdown_gracefully(std::chrono::seconds(5));
//!     for (const std::string& name : r.cancelled_names) std::fprintf(stderr, "cut short: %s\n", name.c_str());
//! @file
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <eddy/runtime/config.hpp>
#include <eddy/runtime/detail/scheduler_api.hpp>
#include <eddy/runtime/detail/task_name.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/spawn_blocking.hpp>
#include <eddy/runtime/task_dump.hpp>
#include <eddy/runtime/metrics.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/awaitable.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy {

/// What Runtime::shutdown_gracefully() did: the drain's outcome, counted in root tasks
/// (spawned ones; a TaskGroup's children or an awaited child task are part of their parent).
struct ShutdownReport {
    /// Tasks that finished during the drain, before the deadline (children spawned during the
    /// drain included).
    std::size_t finished = 0;
    /// Tasks still unfinished at the deadline: each was asked to stop (abortable ones) or
    /// destroyed (the others, and those that did not unwind within the grace).
    std::size_t cancelled = 0;
    /// The names (spawn(task, name), TaskTracker::spawn(task, name)) of the named tasks among
    /// `cancelled`, sorted; unnamed ones are only counted.
    std::vector<std::string> cancelled_names;
    /// Tasks destroyed at the end, unfinished (today's shutdown() does only this): plain
    /// spawns left at the deadline, abortable tasks that did not unwind within the grace.
    std::size_t destroyed = 0;
    /// True when every task finished before the deadline.
    bool clean() const noexcept { return cancelled == 0; }
};

/// N worker threads with work-stealing deques, an injection queue and an io_uring reactor
/// thread: where tasks run (see the file's prologue). Tokio's Runtime and Handle in one.
class Runtime {
public:
    /// Starts the workers. Throws std::invalid_argument for a bad field of `config` (naming it
    /// and its range), std::system_error if a thread cannot start. Reads no environment: the
    /// EDDY_* variables count through RuntimeConfig::from_env() only (config.hpp).
    explicit Runtime(RuntimeConfig config = {});
    ~Runtime();
    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;

    /// Runs `task` on the workers and blocks the calling thread until it finishes; returns its
    /// result or rethrows its exception. Throws eddy::WrongThread when called from a worker
    /// thread of any runtime (that would deadlock it) and eddy::RuntimeStopped if the runtime
    /// is shut down before the task finishes.
    template <class T>
    T block_on(Task<T> task) {
        if (detail::current_scheduler() != nullptr)
            throw WrongThread("eddy::Runtime::block_on called from a worker thread; co_await instead");
        return spawn(std::move(task)).wait();
    }

    /// The same for any other awaitable (eddy/tasks/awaitable.hpp): an operation, a
    /// combinator's result. It runs in a frame of its own; it may borrow from the caller,
    /// who is blocked until it finishes.
    template <detail::NonTaskAwaitable A>
    decltype(auto) block_on(A&& a) {
        return block_on(detail::in_place_task(std::forward<A>(a)));
    }

    /// Starts `task` on this runtime from any thread (see eddy::spawn for the rules).
    template <class T>
    JoinHandle<T> spawn(Task<T> task) {
        auto h = detail::TaskAccess::release(task);
        if (!h) throw BrokenTask("eddy::Runtime::spawn: the task is empty (moved-from or already awaited)");
        detail::spawn_root(scheduler_.get(), h.promise(), h);
        return JoinHandle<T>(detail::header_of(h.address()));
    }

    /// The same for an awaitable that owns what it uses (refused at compile time otherwise:
    /// eddy/tasks/awaitable.hpp, "Who owns the operation").
    template <detail::NonTaskAwaitable A>
    auto spawn(A&& a) {
        return spawn(detail::detached_task(std::forward<A>(a)));
    }

    /// spawn(), with a name that dump() shows for the task (copied; one allocation).
    template <class T>
    JoinHandle<T> spawn(Task<T> task, std::string_view name) {
        if (!task) throw BrokenTask("eddy::Runtime::spawn: the task is empty (moved-from or already awaited)");
        detail::name_task(detail::TaskAccess::get(task), name);  // on failure `task` still owns its frame
        return spawn(std::move(task));
    }

    /// spawn() for a task that can be aborted (eddy::spawn_abortable), from any thread.
    template <class T>
    JoinHandle<T> spawn_abortable(Task<T> task) {
        auto h = detail::TaskAccess::release(task);
        if (!h) throw BrokenTask("eddy::Runtime::spawn_abortable: the task is empty (moved-from or already awaited)");
        detail::make_abortable(h.promise(), h);
        detail::spawn_root(scheduler_.get(), h.promise(), h);
        return JoinHandle<T>(detail::header_of(h.address()));
    }

    /// Runs `f()` on this runtime's blocking threads from any thread (see
    /// eddy/runtime/spawn_blocking.hpp); RuntimeStopped once shut down.
    template <class F>
    auto spawn_blocking(F&& f) {
        return spawn(detail::spawn_blocking_on(scheduler_.get(), std::forward<F>(f), "eddy::Runtime::spawn_blocking"));
    }
    /// Stops the runtime (see above). Idempotent.
    void shutdown();

    /// The longest shutdown_gracefully() waits, after the deadline, for cancelled tasks to unwind.
    static constexpr std::chrono::milliseconds kShutdownGrace{500};

    /// Drains, then stops the runtime (see above): refuses spawns from outside, waits until
    /// every task has finished or `deadline` (real time, even under a virtual clock) has
    /// passed, asks the remaining abortable tasks to stop and gives them up to `grace` to
    /// unwind, then does what shutdown() does. A deadline of zero is shutdown() with a report.
    /// eddy::WrongThread from one of this runtime's workers; std::invalid_argument for a
    /// negative deadline or grace. Idempotent: a later call (or shutdown()) does nothing and
    /// reports zeros.
    ShutdownReport shutdown_gracefully(std::chrono::nanoseconds deadline,
                                       std::chrono::nanoseconds grace = kShutdownGrace);

    /// The live tree of this runtime's tasks (eddy/runtime/task_dump.hpp). Any thread but a
    /// worker's (WrongThread: a task uses `co_await eddy::dump_tasks()`); RuntimeStopped once
    /// the runtime is shutting down.
    TaskDump dump(std::chrono::nanoseconds patience = kDumpPatience) const;

    /// The number of worker threads.
    std::size_t workers() const noexcept;

    /// This runtime's clock (eddy/runtime/time.hpp): the virtual time under ClockMode::paused
    /// or manual, steady_clock::now() otherwise. Any thread.
    std::chrono::steady_clock::time_point now() const noexcept;
    /// Whether the clock is virtual (RuntimeConfig::clock is paused or manual).
    bool clock_is_virtual() const noexcept;
    /// Moves the virtual clock forward by `d` and returns once every timer due by then has
    /// fired, in deadline order, and the runtime is quiet (eddy/runtime/time.hpp). From a
    /// thread outside the runtime. std::invalid_argument when d < 0; std::logic_error on a
    /// real clock; eddy::WrongThread from one of its own workers; eddy::RuntimeStopped when
    /// the runtime is (or gets) shut down.
    void advance(std::chrono::nanoseconds d);

    /// A snapshot of the runtime's figures (eddy/runtime/metrics.hpp). Any thread, any time
    /// (also after shutdown); cheap: no lock, no pause of the workers.
    RuntimeMetrics metrics() const;

    /// The runtime of the calling thread (Tokio's Handle::current()): from a task, the one
    /// whose worker runs it; from a spawn_blocking call, the one whose blocking thread runs
    /// it (eddy::RuntimeStopped once that runtime is shutting down). eddy::WrongThread
    /// anywhere else, the thread hooks (on_thread_start/stop) included. For
    /// `Runtime::current().spawn(...)` or `.metrics()` deep in a task.
    static Runtime& current();

private:
    std::unique_ptr<detail::Scheduler> scheduler_;
};

}  // namespace eddy
