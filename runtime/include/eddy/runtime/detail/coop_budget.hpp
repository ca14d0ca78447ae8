// eddy/runtime/detail/coop_budget.hpp: the cooperative budget as awaiters see it. Not for
// users (their side is eddy/runtime/coop.hpp): no stability promise.
//
// # The protocol
// A worker gives every task it polls (each queue item it runs) kCoopBudget units. Every
// operation that completes without suspending (a socket, pipe or file fast path, a channel,
// oneshot, mutex, semaphore, event or latch wait that is granted at once, a JoinHandle of a
// finished task, a sleep whose deadline passed) calls coop_yield(h) where it would have
// returned "do not suspend". The call that spends the last unit queues the task behind every
// other runnable task of its worker (the same place as yield_now) and makes the awaiter
// suspend after all: the operation's result waits in the awaiter, and the task gets it when it
// runs again. So a task whose I/O is always ready gives its worker back every kCoopBudget
// operations, and the reactor's completions, the global queue and the other tasks get their
// turn.
//
// Cost on the fast path: a thread-local load, a compare, a decrement and a store.
#pragma once

#include <coroutine>
#include <cstdint>

#include <eddy/tasks/detail/promise.hpp>

namespace eddy::detail {

/// Units per poll: Tokio's figure (its coop module), which keeps a poll within tens of
/// microseconds for typical operations.
inline constexpr std::uint32_t kCoopBudget = 128;
/// The budget of a thread that is not polling a task for a worker (or is, unconstrained).
inline constexpr std::uint32_t kCoopUnlimited = UINT32_MAX;

/// The budget left to the task the calling thread polls: kCoopUnlimited off the workers;
/// set to kCoopBudget by a worker each time it runs a queue item. Only its thread touches
/// it (no atomics). Defined in runtime/coop.cpp.
[[gnu::tls_model("initial-exec")]] extern constinit thread_local std::uint32_t t_coop_budget;

/// The slow path of coop_yield: the last unit. Unless `unconstrained`, leaves the budget at
/// zero, queues `h` behind the worker's runnable tasks and returns true; else refills the
/// budget and returns false.
bool coop_exhausted(std::coroutine_handle<> h, bool unconstrained) noexcept;

/// Call after an operation completed without suspending the coroutine `h`, as the value
/// await_suspend returns: false (go on) while budget remains, true when `h` was queued to run
/// later (the budget is spent); then touch nothing of the awaiter any more.
template <class P>
bool coop_yield(std::coroutine_handle<P> h) noexcept {
    std::uint32_t& left = t_coop_budget;
    if (left == kCoopUnlimited) return false;
    if (left > 1) {
        --left;
        return false;
    }
    return coop_exhausted(h, unconstrained_of(h));
}

}  // namespace eddy::detail
