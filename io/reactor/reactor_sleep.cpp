// io/reactor/reactor_sleep.cpp: how the reactor thread sleeps and how other threads wake it (the
// protocol is in reactor.hpp): the sleep in the ring or, while workers run, the batching
// futex sleep; the wake-ups by eventfd or futex; and the workers' calls that end a batch.
#include "reactor/reactor.hpp"

#include "reactor/epoll_state.hpp"
#include "time/timer_queue.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <eddy/runtime/detail/clock.hpp>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace eddy::detail {

bool Reactor::worker_out_of_work(bool parked) noexcept {
    // Seq_cst: pairs with sleep_batching()'s store of kSleepingBatch and its look at the
    // idle state (after parking, the caller did a seq_cst RMW of it).
    if (sleeping_.load(std::memory_order_seq_cst) != kSleepingBatch) return false;
    // A worker that will spin for work first wakes us only if completions are waiting; one
    // that parked always does, since we must then sleep in the ring to see them come.
    const bool pending = !taskrun_flag_ || events_pending();
    if (parked || pending) wake_if_sleeping();
    return pending;
}

void Reactor::watch() noexcept {
    // The caller saw Scheduler::unwatched_flag() (see Worker::schedule_next for the pairing).
    if (sleeping_.load(std::memory_order_seq_cst) == kSleepingUnbounded) wake_if_sleeping();
}

bool Reactor::events_pending() const noexcept {
    // The kernel's word in the shared SQ ring; relaxed: a hint (a stale view costs a wake-up
    // too many or a batch window of delay, never a lost completion).
    return (__atomic_load_n(ring_.sq.kflags, __ATOMIC_RELAXED) & IORING_SQ_TASKRUN) != 0;
}

void Reactor::wake_if_sleeping() noexcept {
    // Seq_cst: pairs with sleep_in_kernel()'s store of how it sleeps and its re-check of the
    // inbox (and sleep_batching()'s).
    if (sleeping_.load(std::memory_order_seq_cst) == kAwake) return;
    const std::uint32_t was = sleeping_.exchange(kAwake, std::memory_order_seq_cst);
    if (was == kAwake) return;
    if (was == kSleepingBatch) {
        syscall(SYS_futex, &sleeping_, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
    } else {
        const std::uint64_t one = 1;
        while (write(event_fd_, &one, sizeof one) < 0 && errno == EINTR) {
        }
    }
    stat_wakeups_.fetch_add(1, std::memory_order_relaxed);  // any thread: a statistic only
}

void Reactor::sleep_in_kernel() {
    // The eventfd read is (re)armed here, the one place that needs it: it may have
    // completed in this very round (reap()), and without it a post() could not wake us.
    if (!wake_armed_) arm_wake();
    // Arming may have had to reap (a full SQ), finishing operations: deliver them first.
    if (!ready_.empty() || retry_ != nullptr) return;
    // A running worker may have posted without waking us yet (it flushes in batches): look
    // at the inbox again within kUnflushedBoundNs while any worker is unparked. Relaxed: a
    // stale count is harmless either way. Bounded, we come back by ourselves; unbounded,
    // post_deferred() sees kSleepingUnbounded below and wakes us (see reactor.hpp).
    const std::size_t unparked = host_.unparked_workers();
    // Batching (sleep_batching()) while a worker runs: it will take the completions when it
    // runs out of work (and wakes us then), so holding them back costs it nothing. Shorter
    // while another worker is parked, which could have taken them at once.
    const bool batch = unparked > 0;
    const std::int64_t now = steady_now_ns();
#if EDDY_TASK_DUMP
    refresh_coarse_clock(now);  // how long tasks wait, for task dumps (await_trace.hpp)
#endif
    if (batch) host_.check_watchdog(now);  // long polls, held LIFO slots (runtime/watchdog.hpp)
    std::int64_t bound = batch          ? (unparked == host_.num_workers() ? kBatchWindowNs : kPartialBatchWindowNs)
                         : unparked > 0 ? kUnflushedBoundNs
                                        : -1;
    // Nothing in the ring but our own wake-up read: no completion to batch, so come back
    // only for the watchdog (and the inbox, at the latest then; timers bound it below).
    if (batch && pending_cqes_ <= (wake_armed_ ? 1u : 0u)) bound = kIdleRingWatchNs;
    // The readiness driver's deadlines (with_deadline) bound the sleep as timers do.
    const std::int64_t timer =
        epoll_ != nullptr ? std::min(earliest_timer(), epoll_earliest_deadline()) : earliest_timer();
    const std::uint64_t requests = virtual_ ? host_.clock_requests_posted() : 0;
    if (virtual_) {
        if (virtual_time(timer, batch, bound)) return;  // due timers, a jump: go round again
    } else if (timer != TimerQueue::kNone) {
        if (timer <= now) {
            kernel_poll_now();
            return;
        }
        if (bound < 0 || timer - now < bound) bound = timer - now;
    }
    if (batch && epoll_ == nullptr && io_uring_sq_ready(&ring_) > 0)
        io_uring_submit(&ring_);  // the futex sleep does not submit
    // Bounded only if we come back by ourselves within kUnflushedBoundNs: a far timer (a long
    // with_timeout, an idle limit) is as good as no bound for a deferred post.
    // Seq_cst: pairs with post() and post_deferred() (see reactor.hpp), and with
    // worker_out_of_work() (kSleepingBatch).
    const bool back_soon = bound >= 0 && bound <= kUnflushedBoundNs;
    sleeping_.store(batch       ? kSleepingBatch
                    : back_soon ? kSleepingBounded
                                : kSleepingUnbounded,
                    std::memory_order_seq_cst);
    // Seq_cst, after sleeping_: a worker that arms an earlier timer from now on sees wake_at_
    // and wakes us; one that armed it before is seen by the second look below.
    const std::int64_t wake_at = bound < 0 ? TimerQueue::kNone : now + bound;
    wake_at_.store(wake_at, std::memory_order_seq_cst);
    // Unbounded, we stop watching the workers: a worker that then gives the watchdog work
    // wakes us (Worker::schedule_next; seq_cst, paired with the idle-state look below).
    const bool unwatched = !batch && !back_soon;
    if (unwatched) host_.set_unwatched(true);
    if (inbox_.load(std::memory_order_seq_cst) != nullptr ||
        (virtual_ ? virtual_changed(timer, requests) : earliest_timer() < wake_at) ||
        batch != (host_.unparked_workers() > 0)) {  // a worker parked, or one was woken
        sleeping_.store(kAwake, std::memory_order_relaxed);
        wake_at_.store(kAwakeAt, std::memory_order_relaxed);
        if (unwatched) host_.set_unwatched(false);
        kernel_poll_now();
        return;
    }
    if (batch) {
        sleep_batching(bound);
        return;
    }
    if (epoll_ != nullptr) {
        epoll_collect(bound);
        sleeping_.store(kAwake, std::memory_order_relaxed);  // as below
        wake_at_.store(kAwakeAt, std::memory_order_relaxed);
        if (unwatched) host_.set_unwatched(false);
        return;
    }
    __kernel_timespec ts{};
    __kernel_timespec* timeout = nullptr;
    if (bound >= 0) {
        ts.tv_sec = bound / 1'000'000'000;
        ts.tv_nsec = bound % 1'000'000'000;
        timeout = &ts;
    }
    io_uring_cqe* cqe = nullptr;
    const int r = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, timeout, nullptr);
    // Relaxed: a submitter that still sees us asleep only writes the eventfd once too often.
    sleeping_.store(kAwake, std::memory_order_relaxed);
    wake_at_.store(kAwakeAt, std::memory_order_relaxed);
    if (unwatched) host_.set_unwatched(false);
    if (r < 0 && r != -ETIME && r != -EINTR && r != -EBUSY && r != -EAGAIN)
        std::fprintf(stderr, "eddy: reactor: waiting for completions failed: %s\n", std::strerror(-r));
}

void Reactor::sleep_batching(std::int64_t bound) {
    // Not in the ring: completions that arrive now wait for the end of the window (or for a
    // worker that runs out of work: worker_out_of_work()), so that one wake-up hands many
    // over. sleep_in_kernel() stored kSleepingBatch and took its second look.
    timespec ts{};
    ts.tv_sec = bound / 1'000'000'000;
    ts.tv_nsec = bound % 1'000'000'000;
    // Sleeps only while the word still reads kSleepingBatch (checked by the kernel).
    syscall(SYS_futex, &sleeping_, FUTEX_WAIT_PRIVATE, kSleepingBatch, &ts, nullptr, 0);
    sleeping_.store(kAwake, std::memory_order_relaxed);
    wake_at_.store(kAwakeAt, std::memory_order_relaxed);
    if (epoll_ == nullptr) io_uring_get_events(&ring_);  // run what completed meanwhile, so that reap() sees it
}

void Reactor::arm_wake() {
    if (epoll_ != nullptr) {  // the eventfd is in the epoll set for good: only the count
        ++pending_cqes_;
        wake_armed_ = true;
        return;
    }
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_read(sqe, event_fd_, &wake_buf_, sizeof wake_buf_, 0);
    io_uring_sqe_set_data64(sqe, kWakeTag);
    ++pending_cqes_;
    wake_armed_ = true;
}

}  // namespace eddy::detail
