// runtime/clock.hpp: RuntimeClock, the clock of one runtime's timers (eddy/runtime/time.hpp).
//
// ClockMode::real reads steady_clock. A virtual clock (paused, manual) is a number of
// steady_clock nanoseconds that starts at steady_clock::now() when the Runtime is built and
// moves only when the driver's thread (io/reactor/virtual_time.cpp) moves it:
//   * to the earliest pending timer, when the runtime is quiet (nothing runnable, no blocking
//     call, nothing the kernel has completed) and a timer is pending: always under `paused`
//     (auto-advance), and under either while an advance() waits for a later target;
//   * to an advance()'s target, when it is quiet and no timer is due by then; that completes
//     the advance (its task is resumed, its thread woken).
// So advance(d) steps through every timer due by now + d in deadline order, letting the
// tasks each one wakes run before time moves on; the caller sees the clock at its target.
//
// Who calls what: now_ns() any thread. request() any thread (Runtime::advance from outside
// the runtime, the awaiter of eddy::time::advance on a worker). Driver's thread only:
// set_now(), earliest_target(), complete_due(). close(): Scheduler::shutdown, after the
// driver has stopped.
//
// Errors: request() throws std::logic_error on a real clock and eddy::RuntimeStopped once
// closed; a thread waiting in an advance when the runtime shuts down is woken with
// `stopped` set (Runtime::advance then throws RuntimeStopped).
#pragma once

#include "private.hpp"
#include "thread_waiter.hpp"

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <limits>
#include <mutex>
#include <vector>

#include <eddy/runtime/config.hpp>
#include <eddy/runtime/detail/clock.hpp>

namespace eddy::detail {

class RuntimeClock {
public:
    static constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();

    /// A thread blocked in Runtime::advance (on its stack).
    struct ThreadRequest {
        ThreadWaiter waiter;
        bool stopped = false;  // written before waiter.signal(), read after wait()
    };

    explicit RuntimeClock(ClockMode mode) noexcept;
    ~RuntimeClock();
    RuntimeClock(const RuntimeClock&) = delete;
    RuntimeClock& operator=(const RuntimeClock&) = delete;

    bool is_virtual() const noexcept { return mode_ != ClockMode::real; }
    /// Whether the clock jumps to the next timer by itself when the runtime is quiet.
    bool auto_advance() const noexcept { return mode_ == ClockMode::paused; }

    /// Steady_clock nanoseconds, or the virtual time.
    std::int64_t now_ns() const noexcept {
        // Acquire: pairs with set_now()'s release (a reader sees the time the driver set
        // before it resumed the reader's task; the queue's handover orders that too).
        return is_virtual() ? now_.load(std::memory_order_acquire) : steady_now_ns();
    }

    /// Driver's thread: moves the virtual time forward to `t` (never back).
    void set_now(std::int64_t t) noexcept {
        if (t > now_.load(std::memory_order_relaxed)) now_.store(t, std::memory_order_release);
    }

    /// Driver's thread: held while it looks at the runtime a last time and moves the clock
    /// (io/reactor/virtual_time.cpp, step 3), so that a worker leaving park in between starts
    /// its tasks after the move (wait_for_jump).
    void lock_jumps() noexcept { jump_.lock(); }
    void unlock_jumps() noexcept { jump_.unlock(); }
    /// A worker that has just left park (its seq_cst RMW of the idle state done), before it
    /// runs anything: with a virtual clock, waits for a jump the driver decided while it
    /// still saw every worker parked. Either the driver's last look sees this worker unparked
    /// and the clock stays, or this worker's tasks start after the move and read the new time.
    void wait_for_jump() noexcept {
        if (is_virtual()) std::lock_guard<std::mutex> wait(jump_);
    }

    /// Queues an advance by `d_ns` (>= 0) from now: `task` is resumed (or `thread` woken) once
    /// the clock has reached it (see above). The caller then wakes the driver.
    void request(std::int64_t d_ns, std::coroutine_handle<> task, ThreadRequest* thread);
    /// Requests queued so far. Seq_cst: the driver reads it before and after announcing its
    /// sleep (Reactor::sleeping_), a requester writes it before reading that word.
    std::uint64_t requests_posted() const noexcept { return posted_.load(std::memory_order_seq_cst); }

    /// Driver's thread: the smallest pending target, or kNone.
    std::int64_t earliest_target() const;
    /// Driver's thread: completes every request whose target the clock has reached: their
    /// tasks are appended to `ready` (the driver queues them), their threads woken.
    void complete_due(std::vector<void*>& ready);
    /// Shutdown (the driver stopped): wakes every waiting thread (stopped), forgets the
    /// waiting tasks (shutdown destroys their frames) and refuses later requests.
    void close() noexcept;

private:
    struct Request {
        std::int64_t target;
        std::coroutine_handle<> task;
        ThreadRequest* thread;
    };

    const ClockMode mode_;
    std::atomic<std::int64_t> now_;
    std::atomic<std::uint64_t> posted_{0};
    mutable std::mutex lock_;
    std::mutex jump_;                // lock_jumps(): a jump and the look at the runtime before it
    std::vector<Request> requests_;  // guarded by lock_
    bool closed_ = false;            // guarded by lock_
};

}  // namespace eddy::detail
