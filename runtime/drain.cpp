// runtime/drain.cpp: Runtime::shutdown_gracefully, the drain before the shutdown protocol
// (scheduler.hpp).
//
// The drain watches the task registry from the calling thread: it polls its size, sleeping
// between looks (50 us doubling to 1 ms). A completion signalling the drainer would put a
// check on every task's completion; polling costs the hot path nothing and a shutdown at
// most a millisecond.
#include <eddy/runtime/abort_handle.hpp>
#include <eddy/runtime/runtime.hpp>

#include "scheduler.hpp"

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

namespace eddy::detail {

namespace {

using Clock = std::chrono::steady_clock;

/// Until `registry` holds at most `left` tasks or `until` has passed; true when it does.
bool wait_down_to(const TaskRegistry& registry, std::size_t left, Clock::time_point until) {
    std::chrono::microseconds nap(50);
    while (registry.size() > left) {
        const Clock::time_point now = Clock::now();
        if (now >= until) return false;
        std::this_thread::sleep_for(std::min<Clock::duration>(nap, until - now));
        nap = std::min<std::chrono::microseconds>(nap * 2, std::chrono::milliseconds(1));
    }
    return true;
}

}  // namespace

std::uint64_t Scheduler::completed_so_far() const noexcept {
    std::uint64_t n = foreign_completed_.load(std::memory_order_relaxed);
    for (const auto& w : workers_) n += w->metrics().tasks_completed;
    return n;
}

ShutdownReport Scheduler::shutdown_gracefully(std::chrono::nanoseconds deadline, std::chrono::nanoseconds grace) {
    if (Worker* w = current_worker(); w != nullptr && &w->scheduler() == this)
        throw WrongThread("eddy::Runtime::shutdown_gracefully called from one of its own workers");
    std::lock_guard lock(shutdown_mutex_);
    ShutdownReport report;
    if (shut_down_) return report;
    shut_down_ = true;
    const std::uint64_t completed_before = completed_so_far();  // before the door: see below
    close_door();  // step 1: from here on, only tasks of this runtime spawn

    const Clock::time_point start = Clock::now();
    const bool empty = deadline.count() == 0 ? registry_.size() == 0 : wait_down_to(registry_, 0, start + deadline);
    if (!empty) {
        // What is left at the deadline: named, counted, and asked to stop when abortable. The
        // abort states are held (retain) so that the stop requests run outside the registry's
        // locks: a stop callback may schedule, cancel I/O or end a task.
        std::vector<AbortState*> to_stop;
        std::size_t plain = 0;  // uncancellable: they stay until destroyed
        registry_.for_each_locked([&](FrameHeader* h) {
            ++report.cancelled;
            if (h->extra != nullptr && !h->extra->name.empty()) report.cancelled_names.push_back(h->extra->name);
            if (AbortState* a = abort_state_of(h); a != nullptr && deadline.count() != 0) {
                a->retain();
                to_stop.push_back(a);
            } else {
                ++plain;
            }
        });
        for (AbortState* a : to_stop) {
            a->abort();
            a->release();
        }
        std::sort(report.cancelled_names.begin(), report.cancelled_names.end());
        // The grace ends when only the uncancellable ones may be left (a guess: one of them may
        // have finished instead, or a stopped task spawned a child; the grace is a bound).
        if (!to_stop.empty()) (void)wait_down_to(registry_, plain, Clock::now() + grace);
    }
    report.destroyed = stop_and_destroy();  // steps 2 to 4
    // Counted once the workers are joined: a worker counts a completion just after it takes the
    // task off the registry, so a count taken when the registry empties may miss the last ones.
    // Those completed in the grace are the cancelled tasks that were not destroyed; a task that
    // finishes as the drain begins may be counted as finished during it.
    const std::size_t unwound = report.cancelled - std::min(report.destroyed, report.cancelled);
    const auto completed = static_cast<std::size_t>(completed_so_far() - completed_before);
    report.finished = completed > unwound ? completed - unwound : 0;
    return report;
}

}  // namespace eddy::detail
