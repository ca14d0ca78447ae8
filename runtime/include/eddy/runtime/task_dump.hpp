//! eddy/runtime/task_dump.hpp: the live tree of a runtime's tasks, for people and tools.
//!
//!     std::cout << rt.dump().to_text();                         // any thread but a worker
//!     std::cout << (co_await eddy::dump_tasks()).to_json();     // from a task
//!
//! Roots are the spawned tasks (and block_on's); under each, the tasks it runs and waits for:
//! an awaited Task, the children of when_all / when_any / when_any_all_results, a TaskGroup's
//! members, with_timeout's task. Each task shows its name (spawn(task, "name"),
//! group.spawn(task, "name")), its state, the co_await it is suspended at (file:line), what it
//! waits on ("read fd 7", "sleep, 118 ms left", "Mutex 0x...", "join task #4"), how long it
//! has waited (milliseconds, from a coarse clock), and whether it is cancelled.
//!
//! How: the dump pauses every worker between two polls (each acknowledges and waits; parked
//! workers are woken to do so), walks the registry of spawned tasks and the records every
//! co_await keeps in its frame (eddy/tasks/detail/await_trace.hpp), copying them raw, then
//! lets the workers go and makes this tree's strings while they run: the pause (`paused`)
//! is about 0.3 ms per 10,000 waiting tasks (docs/performance/deadlines-and-dumps.md).
//! The I/O reactor and the blocking threads keep running: the dump reads only what a waiting
//! task's awaiter set before it suspended.
//! A worker that runs one task for long without it suspending cannot stop: after `patience`
//! (1 s by default) the dump gives up on it and is partial (`complete` false): the workers it
//! names in `busy_workers` were running, and it lists the root tasks by name and kind only
//! (state "unknown"), which is what can be read while tasks run.
//! "runnable": the task is queued (on a worker, "worker" set, or in the global queue) or was
//! about to run on a worker when it stopped; it shows the wait it was woken from.
//!
//! The records are built in with the meson option task_dump (-Dtask_dump=true), off by
//! default for what they cost (docs/performance/deadlines-and-dumps.md). Without them a dump
//! lists the root tasks with their names, kinds and states, but not their waits, sites or
//! children.
//!
//! Errors: Runtime::dump() throws eddy::WrongThread on a worker thread (a running task's own
//! record is stale: use `co_await eddy::dump_tasks()`, which keeps the calling task suspended
//! while it dumps) and eddy::RuntimeStopped once the runtime is shutting down.
//! @file
#pragma once

#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <eddy/runtime/detail/scheduler_api.hpp>
#include <eddy/runtime/io_driver.hpp>
#include <eddy/tasks/detail/await_trace.hpp>

namespace eddy {

/// A snapshot of a runtime's tasks as a tree: Runtime::dump(), or `co_await eddy::dump_tasks()`.
struct TaskDump {
    /// One task of the tree.
    struct Task {
        std::uint64_t id = 0;  ///< this dump's numbering (walk order), for "join task #id"
        std::string name;      ///< empty: unnamed
        /// "spawned", "block_on" (roots), "child" (everything under a root).
        std::string kind;
        /// "suspended", "runnable", "not started", "finished" (a combinator's child its parent
        /// has not collected yet), "unknown" (a partial dump); the dumping task is "suspended"
        /// in "dumping tasks".
        std::string state;
        std::string waits_on;                             ///< what a suspended task waits on
        std::string site;                                 ///< "file:line" of the co_await it is suspended at
        std::optional<std::chrono::milliseconds> waited;  ///< since it suspended
        std::optional<std::size_t> worker;                ///< runnable: whose queue holds it
        bool cancelled = false;  ///< it was cancelled (its stop was requested) and has not finished
        std::vector<Task>
            children;  ///< the tasks it runs and waits for (awaited tasks, combinators' children, group members)
    };

    std::size_t workers = 0;               ///< the runtime's worker count
    IoDriver driver = IoDriver::io_uring;  ///< the kernel interface its reactor drives (ReactorMetrics::driver)
    std::size_t tasks = 0;                 ///< every node of the tree
    std::vector<Task> roots;               ///< the spawned tasks and block_on's, each the top of a tree
    /// False when some workers did not stop within the patience (they are in busy_workers):
    /// then `roots` holds the root tasks' names and kinds only.
    bool complete = true;
    std::vector<std::size_t> busy_workers;  ///< the workers that did not stop in time (when `complete` is false)
    /// How long the dump kept the workers from running tasks: from its pause request until
    /// it let them go (waiting for each to stop, then reading the records). The dump's
    /// other work (the strings of this tree) is done after they go on. A partial dump: until
    /// it gave up on the busy workers.
    std::chrono::nanoseconds paused{0};

    /// An indented tree, one task per line.
    std::string to_text() const;
    /// {"workers":N,"tasks":N,"roots":[{"id":..,"name":..,...,"children":[...]}]}
    std::string to_json() const;
};

/// How long a dump waits for the workers to stop (see above).
inline constexpr std::chrono::milliseconds kDumpPatience{1000};

namespace detail {
/// Pauses `sched`'s workers (all but the calling one when `from_worker`) and walks its tasks.
TaskDump dump_scheduler(Scheduler& sched, bool from_worker, std::chrono::nanoseconds patience);
}  // namespace detail

/// `co_await eddy::dump_tasks()`: the dump of the runtime whose worker runs the calling task
/// (which appears in it as "dumping tasks"). WrongThread off a worker.
class [[nodiscard]] DumpTasks {
public:
    /// What dump_tasks() returns; dumps once awaited.
    explicit DumpTasks(std::chrono::nanoseconds patience = kDumpPatience) noexcept : patience_(patience) {}
    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<>) {
        detail::Scheduler& sched = detail::require_worker("eddy::dump_tasks");
        // The calling task stays suspended (its record names this awaiter) while the dump
        // walks it; it resumes at once after.
        dump_ = detail::dump_scheduler(sched, true, patience_);
        return false;
    }
    TaskDump await_resume() { return std::move(dump_); }
    void dump_wait(detail::DumpWait& d) const { d.text("dumping tasks"); }

private:
    std::chrono::nanoseconds patience_;
    TaskDump dump_;
};

/// `co_await eddy::dump_tasks()`: the dump of the runtime running the calling task, taken
/// while that task stays suspended ("dumping tasks"). Waits up to `patience` for each
/// worker to stop between two polls, then gives a partial dump. WrongThread off a worker.
inline DumpTasks dump_tasks(std::chrono::nanoseconds patience = kDumpPatience) noexcept { return DumpTasks(patience); }

}  // namespace eddy
