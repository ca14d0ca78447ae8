//! eddy/runtime/time.hpp: a runtime's clock, and virtual time for tests (Tokio's
//! tokio::time::{Instant::now, advance} and the runtime's start_paused).
//!
//!     eddy::Runtime rt({.workers = 2, .clock = eddy::ClockMode::paused});
//!     rt.block_on([]() -> eddy::Task<void> {
//!         auto t0 = eddy::time::now();
//!         co_await eddy::sleep(30s);                       // returns at once in real time
//!         assert(eddy::time::now() - t0 == 30s);           // exactly: the clock jumped to it
//!         co_await eddy::time::advance(5s);                // fires what is due by then, in order
//!     }());
//!
//! # The clock (RuntimeConfig::clock)
//!   real:   steady_clock. The default.
//!   paused: virtual. It starts at steady_clock::now() when the Runtime is built and does not
//!           move by itself; it jumps to the earliest pending timer whenever the runtime is
//!           quiet (auto-advance), and moves on advance(). A 30 s idle timeout is tested in
//!           milliseconds, deterministically.
//!   manual: virtual, moved by advance() only (a test that controls every step).
//! Every timer of the runtime runs on it: sleep, sleep_until, with_timeout, with_deadline (as
//! a with_timeout: eddy/time/with_deadline.hpp),
//! Interval, and what is built on them. Deadlines are steady_clock time points either way.
//!
//! # Quiet, and what auto-advance does with I/O
//! The runtime is quiet when no task is runnable anywhere (every worker parked, nothing
//! queued), no spawn_blocking call is queued or running, and the reactor, after submitting
//! what is queued and taking every completion the kernel already has, has nothing to hand
//! over. Then time moves: I/O still in flight does not hold it back (as in Tokio). That is what
//! a test of an idle timeout on a socket wants (the clock jumps while the read waits), and a
//! write to a pipe, a unix socket or a loopback TCP socket reaches the peer inside the write
//! call, so a test whose client and server both run in the runtime sees data before the
//! timeout. (On TCP only with `set_nodelay(true)`: Nagle's algorithm holds a small segment
//! until the previous one is acknowledged, up to the peer's 40 ms delayed ACK, which a peer
//! that also writes, a TLS server sending its session tickets, turns on.) What is not
//! quiet-safe: I/O that completes later in real time (a disk read going to the device, a
//! remote peer, another process): under `paused` a timeout around it may expire first. Use
//! `manual` or a real clock for those.
//!
//! # advance(d)
//! Moves the clock from now to now + d: step by step to each timer due by then, in deadline
//! order, each time waiting until the runtime is quiet again (so the tasks a timer woke run,
//! and see the clock at that timer's deadline, before the next one fires); then to now + d.
//! It returns once the clock is there and the runtime quiet. `co_await eddy::time::advance(d)`
//! from a task (which is not counted as runnable while it waits), Runtime::advance(d) from a
//! thread outside the runtime. A task that never lets the runtime be quiet (it yields in a
//! loop) holds an advance back, as it would a real timer. advance is not a cancellation point.
//!
//! # Who may call what
//! eddy::time::now() anywhere: on a worker the clock of its runtime, elsewhere steady_clock
//! (Runtime::now() reads a given runtime's clock from any thread). co_await advance on a worker
//! (eddy::WrongThread off one); Runtime::advance off the runtime's own workers (WrongThread:
//! it would wait for itself), and not from the runtime's spawn_blocking calls (a running call
//! keeps the runtime from being quiet: that would wait forever).
//!
//! # Errors
//!   advance on a runtime whose clock is real: std::logic_error.
//!   A negative duration: std::invalid_argument (thrown by advance(d) itself).
//!   Runtime::advance after shutdown, or while the runtime shuts down: eddy::RuntimeStopped.
//! @file
#pragma once

#include <chrono>
#include <coroutine>
#include <cstdint>

#include <eddy/runtime/detail/clock.hpp>

namespace eddy::time {

/// now()'s time points are steady_clock's, also under a virtual clock (which starts at
/// steady_clock::now() when the Runtime is built, then moves as the file comment says).
using Clock = std::chrono::steady_clock;

/// The clock of the calling worker's runtime (virtual under ClockMode::paused or manual);
/// steady_clock::now() off a worker.
inline Clock::time_point now() noexcept { return detail::clock_now(); }

/// Whether the calling thread is a worker of a runtime with a virtual clock.
inline bool is_virtual() noexcept { return detail::clock_is_virtual(); }

/// `co_await eddy::time::advance(d)`: see the file comment.
class [[nodiscard]] AdvanceAwaiter {
public:
    /// Made by advance().
    explicit AdvanceAwaiter(std::int64_t ns) noexcept : ns_(ns) {}
    bool await_ready() const noexcept { return false; }
    /// WrongThread off a worker, std::logic_error on a real clock.
    void await_suspend(std::coroutine_handle<> h);
    void await_resume() const noexcept {}

private:
    std::int64_t ns_;
};

/// Moves the calling task's runtime's virtual clock forward by `d` (see above);
/// std::invalid_argument when d is negative. The co_await throws WrongThread off a worker and
/// std::logic_error when the runtime's clock is real.
AdvanceAwaiter advance(std::chrono::nanoseconds d);

}  // namespace eddy::time
