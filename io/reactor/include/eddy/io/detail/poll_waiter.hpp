// eddy/io/detail/poll_waiter.hpp: what the reactor's readiness state (io/reactor/poll_state.hpp)
// knows of a task waiting for a descriptor to become readable or writable. Not for users.
//
// The readiness state queues waiters and wakes them; it never knows what they wait to do.
// A waiter is a Runnable (scheduler_api.hpp) that the state queues, per direction, under its
// lock, and hands back to the workers when an event comes, as a queue item: running it is
// the waiter's retry (a socket operation tries its recv or send again: eddy/net/detail/
// socket_io.hpp). What the state writes into it: the result when the wait settles without
// a retry (cancelled, or the descriptor closed: the result its operation gives then, which
// the waiter says up front).
#pragma once

#include <coroutine>
#include <cstdint>

#include <eddy/runtime/detail/scheduler_api.hpp>

namespace eddy::detail {

class Reactor;

struct PollWaiter : Runnable {
    /// The direction a waiter waits for (PollState's queue index).
    enum Dir : std::uint8_t { kRead = 0, kWrite = 1 };

    /// `retry` runs the waiter again on a worker; `closed_result` is what its operation gives
    /// once its descriptor was closed by another task (0, -EPIPE, -EINVAL...).
    PollWaiter(void (*retry)(Runnable*) noexcept, Dir dir, std::int32_t closed_result) noexcept
        : Runnable{retry}, closed_result_(closed_result), dir_(dir) {}

    // Set by the waiter before it queues: the reactor of the runtime it runs on, where its
    // retries and its resumption are queued whatever runtime the state is bound to
    // (poll_state.hpp, "Runtimes"), and the task to resume when it settles without a retry.
    Reactor* home_ = nullptr;
    std::coroutine_handle<> frame_{};
    // How the wait settled: written by the waiter's attempts, or by the state (cancelled:
    // -ECANCELED; closed: closed_result_) under its lock.
    std::int64_t result_ = 0;
    // Guarded by the state's lock: queued on it; cancelled by a stop callback.
    PollWaiter* prev_ = nullptr;
    PollWaiter* next_ = nullptr;
    const std::int32_t closed_result_;
    const Dir dir_;
    bool linked_ = false;
    bool cancelled_ = false;
};

}  // namespace eddy::detail
