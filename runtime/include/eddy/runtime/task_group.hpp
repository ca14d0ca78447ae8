//! eddy/runtime/task_group.hpp: TaskGroup, a nursery: tasks started in it never outlive it.
//!
//!     co_await eddy::task_group([&](eddy::TaskGroup& g) -> eddy::Task<void> {
//!         for (;;) g.spawn(serve(co_await listener.accept()));   // children run in parallel
//!     });
//!
//! Semantics:
//!   * task_group(body) is lazy like every Task. Awaited, it calls `body(group)` and runs the
//!     returned task at once on the awaiting worker; the body and every child spawned into the
//!     group (from the body or from other children) are the group's members.
//!   * `g.spawn(task)` queues the child on the calling worker (it runs next there, Tokio's
//!     LIFO slot, and idle workers may steal what it displaces), so children run in parallel.
//!     Members may be added while the group runs, for as long as one member is still running.
//!   * The group completes when the body and every child have finished, their frames
//!     destroyed; the awaiter resumes on the worker that finished the last one. A finished
//!     child's frame is freed at once, so a long-running group (a server) does not grow.
//!   * Failure: the first member to throw cancels every other member; once all have stopped,
//!     its exception is rethrown from the co_await. An OperationCancelled thrown after the
//!     group's cancellation was requested is how members stop, not a failure.
//!   * Supervision: `task_group(body, on_child_error)` runs the same group, except that a
//!     child's exception does not fail the group: it is handed to `on_child_error` (a callable
//!     taking std::exception_ptr, run on the worker that finished the child, possibly on
//!     several workers at once: it must be thread-safe), and the other members run on. For
//!     servers: one connection's reset must not close the others. The body's own exception
//!     still fails the group (it cancels the children, then is rethrown), and so does an
//!     exception escaping `on_child_error`. OperationCancelled after the group's cancellation
//!     was requested is how members stop, and is not handed to the handler.
//!   * Cancellation: `g.cancel()` cancels every member (what each awaits throws
//!     eddy::OperationCancelled, eddy/tasks/cancellation.hpp); a group stopped that way
//!     completes normally. Cancelling the group's awaiter cancels every member too, and the
//!     co_await then throws OperationCancelled (if no member failed otherwise; also when the
//!     awaiter's stop came just as the last member finished). Children spawned after a cancel
//!     start cancelled.
//!   * No member outlives the group. At runtime shutdown, destroying the frame that awaits
//!     the group destroys the members that had not finished.
//! Errors: spawning an empty task throws eddy::BrokenTask; awaiting the group off a worker
//! throws eddy::WrongThread. `spawn` must be called by a member of the group (the body or a
//! child) while it runs: the group (and its TaskGroup&) is gone once it has completed.
//! @file
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <functional>
#include <optional>
#include <string_view>
#include <stdexcept>
#include <stop_token>
#include <type_traits>

#include <eddy/runtime/detail/scheduler_api.hpp>
#include <eddy/tasks/detail/spin_lock.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/awaitable.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy {

/// What a supervising task_group does with a child's exception (see above).
using ChildErrorHandler = std::function<void(std::exception_ptr)>;

/// A scope whose members run in parallel and are all finished when it completes (see the
/// file's prologue); made by eddy::task_group and eddy::supervised_task_group.
class TaskGroup {
public:
    TaskGroup(const TaskGroup&) = delete;
    TaskGroup& operator=(const TaskGroup&) = delete;
    /// Destroys members that never finished (runtime shutdown only; see above).
    ~TaskGroup();

    /// Starts `child` as a member of the group, on the calling worker.
    void spawn(Task<void> child);
    /// spawn(), with a name that Runtime::dump() shows for the member (copied).
    void spawn(Task<void> child, std::string_view name);
    /// spawn() for an awaitable that is not a Task and gives nothing (a frame of its own). Only
    /// what owns everything it uses: the member may outlive the task that spawned it, so an
    /// operation that borrows from the caller is refused at compile time
    /// (eddy/tasks/awaitable.hpp, "Who owns the operation").
    template <detail::NonTaskAwaitable A>
    void spawn(A&& a) {
        static_assert(std::is_void_v<await_result_t<A>>,
                      "a TaskGroup member gives no value: spawn a Task<void> that uses it, or collect "
                      "values with eddy::JoinSet or eddy::when_all");
        if constexpr (std::is_void_v<await_result_t<A>>) spawn(detail::detached_task(std::forward<A>(a)));
    }
    /// Cancels every member; the group then completes normally (unless a member failed with
    /// another exception). Idempotent. Like spawn(), for members (and for code that knows
    /// the group is still running): the group is gone once it completes. To cancel a group
    /// from outside, run it under a token of your own: `with_stop_token(task_group(...), t)`.
    void cancel() noexcept;
    /// True once the group's cancellation was requested (cancel(), a failure or its awaiter).
    bool cancelled() const noexcept { return stop_ && stop_->stop_requested(); }
    /// The token the members run under, for code that takes a std::stop_token.
    std::stop_token stop_token() const noexcept { return stop_ ? stop_->token()->share() : std::stop_token{}; }

    /// The co_await of a group (used by task_group()).
    class Awaiter {
    public:
        /// The group `g` whose body is `body`.
        Awaiter(TaskGroup& g, Task<void>& body) : group_(g), body_(body) {}
        bool await_ready() const {
            detail::require_worker("eddy::task_group");
            return false;
        }
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> parent) {
            return group_.start(parent, detail::cancellation_scope_of(parent), body_);
        }
        void await_resume() const { group_.finish(); }
        /// Task dumps: the group's live members under it.
        void dump_wait(detail::DumpWait& d) const { group_.dump_members(d); }

    private:
        TaskGroup& group_;
        Task<void>& body_;
    };

private:
    template <class F>
    friend Task<void> task_group(F body);
    template <class F>
    friend Task<void> task_group(F body, ChildErrorHandler on_child_error);
    TaskGroup() = default;
    explicit TaskGroup(ChildErrorHandler h) : on_child_error_(std::move(h)) {}

    std::coroutine_handle<> start(std::coroutine_handle<> parent, const detail::TaskCancellation* parent_scope,
                                  Task<void>& body);
    void adopt(Task<void>& member);
    void finish() const;
    void dump_members(detail::DumpWait& d) const;
    void record_failure(const std::exception_ptr& e, bool from_body) noexcept;
    static std::coroutine_handle<> on_member_done(void* ctx, detail::PromiseBase& p,
                                                  std::coroutine_handle<> self) noexcept;

    // Members alive. Starts at 1 for the body; spawn() adds one before it queues a child
    // (relaxed: the caller is itself a live member, so the count cannot reach zero meanwhile,
    // and its own later acq_rel decrement publishes the increment); each member's completion
    // takes one away (acq_rel: release publishes its effects, acquire on the last sees all).
    std::atomic<std::size_t> live_{0};
    std::coroutine_handle<> parent_;
    const detail::FinishHook member_hook_{&on_member_done, this};  // every member's completion
    const detail::TaskCancellation* parent_scope_ = nullptr;
    std::optional<detail::LinkedStopSource> stop_;
    // The first failure: written once by the failed_ CAS winner, read after the last member
    // (ordered by live_'s acq_rel chain).
    std::atomic<bool> failed_{false};
    std::exception_ptr first_error_;
    // Members not yet finished, linked through their frame headers (prev/next, which only
    // root tasks use otherwise): destroyed by ~TaskGroup if the runtime shuts down first.
    // A spin lock, not std::mutex: it is taken in the members' completion hook, which is
    // noexcept, and held for four pointer writes.
    mutable detail::SpinLock members_lock_;
    detail::FrameHeader* members_ = nullptr;  // guarded by members_lock_
    // Supervision (empty: a child's exception fails the group). body_ tells the body from
    // the children; both written in start(), before any member runs.
    ChildErrorHandler on_child_error_;
    detail::FrameHeader* body_ = nullptr;
};

/// Runs `body(group)` as a TaskGroup (see above) and completes when the body and all the
/// children it spawned have finished. `body` is any callable taking `TaskGroup&` and
/// returning `Task<void>`; it is kept alive until the group completes, so a coroutine lambda
/// may capture by reference.
template <class F>
Task<void> task_group(F body) {
    static_assert(std::is_invocable_r_v<Task<void>, F&, TaskGroup&>,
                  "eddy::task_group: the body must take TaskGroup& and return Task<void>");
    TaskGroup group;
    Task<void> first = std::invoke(body, group);
    co_await TaskGroup::Awaiter(group, first);
}

/// task_group(body) that supervises its children: a child's exception goes to
/// `on_child_error` and the other members run on (see "Supervision" above). Throws
/// std::invalid_argument (when awaited) for an empty handler.
template <class F>
Task<void> task_group(F body, ChildErrorHandler on_child_error) {
    static_assert(std::is_invocable_r_v<Task<void>, F&, TaskGroup&>,
                  "eddy::task_group: the body must take TaskGroup& and return Task<void>");
    if (!on_child_error) throw std::invalid_argument("eddy::task_group: the child error handler is empty");
    TaskGroup group(std::move(on_child_error));
    Task<void> first = std::invoke(body, group);
    // NOLINTNEXTLINE(bugprone-use-after-move): a coroutine's implicit use of its parameters, not a read
    co_await TaskGroup::Awaiter(group, first);
}

}  // namespace eddy
