// io/reactor/virtual_time.cpp: the reactor's part of a virtual clock (ClockMode::paused and manual).
// The semantics are in eddy/runtime/time.hpp, the clock and its advance() requests in
// runtime/clock.hpp, how this fits the reactor's sleep in reactor.hpp ("Virtual time").
//
// # One step (virtual_step, reactor thread, instead of sleeping with every worker parked)
//   1. The runtime must be quiet (quiet()): no spawn_blocking call queued or running (nor a
//      call on the readiness driver's file pool), then no
//      worker unparked, nothing in the injection queue or the reactor's inbox. The blocking
//      pool is read first: a call that ended has queued what it resumes (and so unparked a
//      worker, a seq_cst RMW of the idle state) before the pool's count drops.
//   2. Submit what is queued and take every completion the kernel already has (with
//      DEFER_TASKRUN, a socket's readiness is turned into a completion only now). Anything
//      to hand over: go round the loop; time does not move while there is work.
//   3. Recompute each queue's earliest wake-up (a disarmed timer may have left it low), then
//      move the clock: to the earliest timer if it is due by the earliest advance() target
//      (or, with no target, under `paused`); else to that target, completing the advances
//      it satisfies. The loop's fire_timers() then fires what is due, and the next step waits
//      for the tasks they woke. A wheel slot's start (TimerQueue::earliest is a lower bound)
//      may come before its timers' deadlines: that step fires nothing and the next one goes
//      on to the exact deadline, with no task run in between.
// No worker can make the runtime busy between 1 and 3 except through a completion, an outside
// spawn or a blocking call, all of which come from outside the runtime. Step 3 looks at the
// runtime once more after reading the timers and before moving the clock, so a task that
// arrived meanwhile and armed a timer (a with_timeout's deadline, before its sleep) does not
// see time jump to that timer while it runs. That look and the move hold the clock's jump
// lock, which a worker leaving park takes (and drops) before it runs anything: a worker that
// unparked after the look starts its tasks once the clock has moved, as if they came a moment
// later, and never reads the old time and then sees the clock jump past its own new timer.
#include "reactor/reactor.hpp"

#include "time/timer_queue.hpp"

#include <algorithm>

namespace eddy::detail {

namespace {

/// While time cannot move (a blocking call runs), the reactor looks again this often.
constexpr std::int64_t kVirtualPollNs = 1'000'000;

}  // namespace

std::int64_t Reactor::timer_now() const noexcept { return virtual_ ? host_.clock_now_ns() : steady_now_ns(); }

bool Reactor::virtual_time(std::int64_t timer, bool batch, std::int64_t& bound) {
    if (timer <= host_.clock_now_ns()) {  // due already: fire_timers() takes them
        kernel_poll_now();
        return true;
    }
    if (batch) return false;  // a worker runs: it wakes us when it parks (worker_out_of_work)
    if (virtual_step()) return true;
    // Time must move but cannot yet: look again soon, in real time.
    if (earliest_timer() != TimerQueue::kNone || host_.clock_earliest_target() != DriverHost::kNoTarget)
        bound = bound < 0 ? kVirtualPollNs : std::min(bound, kVirtualPollNs);
    return false;
}

bool Reactor::quiet() const {
    // The order matters: see step 1 above. Seq_cst loads of the idle state and the inbox.
    // The readiness driver's file pool (reactor_epoll.cpp) runs calls as spawn_blocking does:
    // while one runs, time does not move (its end comes through the inbox, looked at last).
    return host_.blocking_busy() == 0 && pooled_ == 0 && host_.unparked_workers() == 0 && host_.global_depth() == 0 &&
           inbox_.load(std::memory_order_seq_cst) == nullptr;
}

bool Reactor::virtual_step() {
    if (!quiet()) return false;
    kernel_poll_now();  // step 2
    reap();
    // A wake-up read here (the eventfd's CQE: wake_armed_ is false now) was someone asking
    // the loop to look, shutdown() among them, which only sets stop_ and writes the eventfd:
    // go round, where run() sees stop_ and sleep_in_kernel() arms the read again. Sleeping
    // on instead would wait for a wake-up that was already taken.
    if (!ready_.empty() || retry_ != nullptr || !wake_armed_) return true;
    for (auto& q : timer_queues_) q->refresh_earliest();  // step 3
    const std::int64_t timer = earliest_timer();
    const std::int64_t target = host_.clock_earliest_target();
    // Quiet still, now that the timers are read: a worker woken since step 1 (by an outside
    // spawn) may have armed one of them while its task still runs, and time must not move
    // to a deadline of a running task. Under the jump lock, which a worker leaving park
    // takes before it runs anything: one that left park before this look is seen here, one
    // that leaves after it starts its tasks once the clock has moved ("a moment later").
    struct JumpLock {
        DriverHost& host;
        explicit JumpLock(DriverHost& h) noexcept : host(h) { host.clock_lock_jumps(); }
        ~JumpLock() { host.clock_unlock_jumps(); }
        JumpLock(const JumpLock&) = delete;
        JumpLock& operator=(const JumpLock&) = delete;
    } jump(host_);
    if (!quiet()) return true;
    if (target != DriverHost::kNoTarget) {
        if (timer <= target) {
            host_.clock_set_now(timer);
        } else {
            host_.clock_set_now(target);
            host_.clock_complete_due(ready_);
        }
        return true;
    }
    if (!host_.clock_auto_advance() || timer == TimerQueue::kNone) return false;
    host_.clock_set_now(timer);
    return true;
}

bool Reactor::virtual_changed(std::int64_t timer, std::uint64_t requests) const noexcept {
    // The second look before sleeping (reactor.hpp): a timer armed, or an advance() requested,
    // since the first. (Virtual deadlines are not compared with the real wake-up time.)
    return earliest_timer() < timer || host_.clock_requests_posted() != requests;
}

}  // namespace eddy::detail
