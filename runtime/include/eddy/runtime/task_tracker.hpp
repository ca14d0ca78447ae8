//! eddy/runtime/task_tracker.hpp: TaskTracker, a count of spawned tasks that a shutdown can
//! wait for (tokio_util's TaskTracker).
//!
//!     eddy::TaskTracker tracker;
//!     for (;;) {
//!         auto conn = co_await listener.accept();
//!         tracker.spawn(serve(std::move(conn)), "conn");   // runs at once, detached
//!     }
//!     ...                                   // on SIGTERM: stop accepting, then
//!     tracker.close();
//!     co_await tracker.wait();              // until every tracked task has ended
//!
//! Semantics:
//!   * `spawn(task)` starts the task at once (eddy::spawn_abortable, detached: nothing holds
//!     its result) and counts it until its frame is gone: `len()` is the number of tracked
//!     tasks that have not ended. Unlike a JoinSet, results are not kept: a value is dropped,
//!     an exception goes to RuntimeConfig::on_unhandled_exception as for any detached task.
//!   * `close()` marks the tracker closed; `reopen()` undoes it. Closing does not refuse
//!     spawns (as in Tokio): it only lets `wait()` end.
//!   * `co_await tracker.wait()` returns once the tracker is closed and empty (at once if it
//!     is); it waits again after a reopen(). Any number of tasks may wait.
//!   * Tracked tasks are abortable, so Runtime::shutdown_gracefully() can cancel them at its
//!     deadline: their pending awaits throw eddy::OperationCancelled and they unwind.
//!   * Cost per task: the task's frame, a small wrapper frame, an abort state, and a counted
//!     reference to the tracker's state.
//!
//! Who may call what: spawn() from a runtime worker (eddy::WrongThread otherwise;
//! spawn_on(runtime, task) from any thread), wait() from a task; close, reopen, len,
//! is_closed and is_empty from any thread. Copies share one tracker (a shared state the
//! tracked tasks also hold: any copy may be destroyed while they run).
//!
//! Cancellation: a wait() cancelled while it waits resumes with eddy::OperationCancelled.
//! @file
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include <eddy/runtime/abort_handle.hpp>
#include <eddy/runtime/detail/scheduler_api.hpp>
#include <eddy/runtime/detail/task_name.hpp>
#include <eddy/runtime/detail/wait_queue.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/tasks/detail/spin_lock.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy {

/// A count of spawned tasks, closed and waited for at shutdown (see the file's prologue).
class TaskTracker {
    struct State {
        detail::SpinLock lock;
        std::atomic<std::size_t> count{0};  // written under lock; read anywhere by len()
        std::atomic<bool> closed{false};    // the same
        detail::WaitQueue waiters{lock, nullptr, this};

        bool done_locked() const noexcept {
            return closed.load(std::memory_order_relaxed) && count.load(std::memory_order_relaxed) == 0;
        }
        /// Wakes every waiter if the tracker is closed and empty.
        void wake_if_done() noexcept {
            detail::WakeList wakes;
            {
                std::lock_guard guard(lock);
                if (done_locked()) waiters.grant_all(wakes);
            }
            wakes.wake_all();
        }
    };

    /// Counts one task from its spawn until its wrapper frame is destroyed.
    class Token {
    public:
        explicit Token(std::shared_ptr<State> s) noexcept : state_(std::move(s)) {
            std::lock_guard guard(state_->lock);
            state_->count.store(state_->count.load(std::memory_order_relaxed) + 1, std::memory_order_release);
        }
        Token(Token&& o) noexcept = default;
        Token(const Token&) = delete;
        Token& operator=(const Token&) = delete;
        Token& operator=(Token&&) = delete;
        ~Token() {
            if (!state_) return;
            {
                std::lock_guard guard(state_->lock);
                state_->count.store(state_->count.load(std::memory_order_relaxed) - 1, std::memory_order_release);
            }
            state_->wake_if_done();
        }

    private:
        std::shared_ptr<State> state_;
    };

    // The token is the first parameter, so it is destroyed last: after the tracked task's
    // frame (the second parameter), whose locals are then released.
    template <class T>
    static Task<void> run(Token, Task<T> task) {
        co_await std::move(task);
    }

    /// The wrapper task that tracks `task`, named when `name` is not empty.
    template <class T>
    Task<void> tracked(Task<T> task, std::string_view name, const char* what) {
        if (!task) throw BrokenTask(std::string(what) + ": the task is empty (moved-from or already awaited)");
        Task<void> wrapper = run(Token(state_), std::move(task));
        detail::name_task(detail::TaskAccess::get(wrapper), name);  // on failure `wrapper` frees its frame
        return wrapper;
    }

public:
    /// An open, empty tracker.
    TaskTracker() : state_(std::make_shared<State>()) {}

    /// Spawns `task` on the calling worker's runtime (eddy::spawn_abortable) and tracks it;
    /// `name`, when given, is what Runtime::dump() and ShutdownReport::cancelled_names show.
    /// eddy::WrongThread off a worker, eddy::BrokenTask for an empty task,
    /// eddy::RuntimeStopped once the runtime is shutting down.
    template <class T>
    void spawn(Task<T> task, std::string_view name = {}) {
        (void)eddy::spawn_abortable(tracked(std::move(task), name, "eddy::TaskTracker::spawn"));  // detached
    }
    /// The same on `rt`, from any thread (Runtime::spawn's rules).
    template <class T>
    void spawn_on(Runtime& rt, Task<T> task, std::string_view name = {}) {
        (void)rt.spawn_abortable(tracked(std::move(task), name, "eddy::TaskTracker::spawn_on"));
    }

    /// Closes the tracker: wait() ends once it is empty. True if it was open.
    bool close() noexcept {
        bool was_open = false;
        {
            std::lock_guard guard(state_->lock);
            was_open = !state_->closed.load(std::memory_order_relaxed);
            state_->closed.store(true, std::memory_order_release);
        }
        state_->wake_if_done();
        return was_open;
    }
    /// Opens it again: later waits wait for the next close(). True if it was closed.
    bool reopen() noexcept {
        std::lock_guard guard(state_->lock);
        const bool was_closed = state_->closed.load(std::memory_order_relaxed);
        state_->closed.store(false, std::memory_order_release);
        return was_closed;
    }
    /// Whether close() was called (and no reopen() since).
    bool is_closed() const noexcept { return state_->closed.load(std::memory_order_acquire); }
    /// Tracked tasks that have not ended (their frames are not all gone yet).
    std::size_t len() const noexcept { return state_->count.load(std::memory_order_acquire); }
    /// len() == 0.
    bool is_empty() const noexcept { return len() == 0; }

    /// What `co_await tracker.wait()` awaits.
    class [[nodiscard]] Awaiter : public detail::WaitAwaiter<Awaiter> {
    public:
        static constexpr const char* kWhat = "co_await on an eddy::TaskTracker::wait";
        static constexpr const char* kCancelled = "eddy::TaskTracker::wait: the wait was cancelled";

        /// Made by wait(); holds the tracker's state while it waits.
        explicit Awaiter(std::shared_ptr<State> s) noexcept : WaitAwaiter(s->waiters), state_(std::move(s)) {}
        /// Lock held: done when closed and empty.
        bool try_now(detail::WakeList&) const noexcept { return state_->done_locked(); }
        void await_resume() { finish_wait(); }

    private:
        std::shared_ptr<State> state_;
    };
    /// Returns once the tracker is closed and empty (see the prologue).
    Awaiter wait() const noexcept { return Awaiter(state_); }

private:
    std::shared_ptr<State> state_;
};

}  // namespace eddy
