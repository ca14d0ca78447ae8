//! eddy/runtime/coop.hpp: the cooperative budget, which keeps a task whose operations never
//! have to wait from holding its worker.
//!
//! Fast paths make eddy quick: a read that finds data, a send that fits, a mutex that is free,
//! a channel that has an item all complete without suspending. A task that only ever meets
//! such operations would never give its worker back, and every other task queued there (a
//! timer that fired, a connection whose data arrived) would wait until it ends. So each time a
//! worker polls a task it gives it a budget of operations (128, as Tokio does). Every
//! operation that completes at once spends one unit; the one that spends the last makes the
//! task yield: it goes behind every other runnable task of its worker, with the operation's
//! result kept for it (nothing is lost or done twice), and the budget is full again the next
//! time the task runs. Operations that suspend anyway cost nothing.
//!
//! What consumes budget: socket, pipe and file operations that complete at once; Channel send
//! and receive, oneshot receive, Mutex lock, Semaphore acquire, Event and Latch waits granted
//! at once; awaiting a JoinHandle of a finished task; when_all/when_any whose children all
//! finished without suspending; a sleep whose deadline has passed; consume_budget() below.
//! Not: awaiting a Task (a call), yield_now (it yields anyway), synchronous calls such as
//! Mutex::unlock or Channel::try_send.
//!
//!     for (;;) {                                      // a loop on always-ready I/O
//!         std::size_t n = co_await file.read_at(buf, offset);  // yields every 128 reads
//!         ...
//!     }
//!     co_await eddy::coop::consume_budget();          // a long computation's turn to count
//!     co_await eddy::coop::unconstrained(flush_all()); // must not be preempted: no budget
//! @file
#pragma once

#include <coroutine>
#include <cstdint>
#include <optional>

#include <eddy/runtime/detail/coop_budget.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/awaitable.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::coop {

namespace detail {

class ConsumeBudget {
public:
    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
        return eddy::detail::coop_yield(h);
    }
    void await_resume() const noexcept {}
};

class RemainingBudget {
public:
    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
        const std::uint32_t left = eddy::detail::t_coop_budget;
        if (left != eddy::detail::kCoopUnlimited && !eddy::detail::unconstrained_of(h)) left_ = left;
        return false;
    }
    std::optional<std::uint32_t> await_resume() const noexcept { return left_; }

private:
    std::optional<std::uint32_t> left_;
};

}  // namespace detail

/// `co_await eddy::coop::consume_budget()`: spends one unit of the calling task's budget, as
/// an operation that completed at once does, and yields if that was the last. For loops that
/// compute, or poll something eddy does not know about, between awaits. Never throws.
[[nodiscard]] inline detail::ConsumeBudget consume_budget() noexcept { return {}; }

/// `co_await eddy::coop::remaining_budget()`: the units the calling task may still spend
/// before it yields (1..128), or std::nullopt when it runs unconstrained or not on a worker.
[[nodiscard]] inline detail::RemainingBudget remaining_budget() noexcept { return {}; }

/// Runs `task` without a budget: neither it nor the tasks it awaits (directly, or as
/// when_all/when_any/with_timeout children) are ever made to yield by the budget. For a
/// section that must not be preempted; it still gives its worker back whenever it really
/// waits. Tasks it spawns (eddy::spawn, TaskGroup members) are budgeted as usual. It keeps the
/// awaiter's cancellation. Use sparingly: this is how a worker gets held for seconds.
template <class T>
Task<T> unconstrained(Task<T> task) {
    const eddy::detail::TaskCancellation* parent = co_await eddy::detail::CurrentScope{};
    // The parent's token (a copy shared with the parent: share() marks both), task-locals.
    eddy::detail::TaskCancellation own(parent, eddy::detail::TaskCancellation::Derive{});
    own.unconstrained = true;
    co_return co_await typename Task<T>::Awaiter(task, &own);
}

/// The same for any other awaitable (a frame of its own).
template <eddy::detail::NonTaskAwaitable A>
auto unconstrained(A&& a) {
    return unconstrained(eddy::detail::in_place_task(std::forward<A>(a)));
}

}  // namespace eddy::coop
