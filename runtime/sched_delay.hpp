// runtime/sched_delay.hpp: a worker's scheduling-delay histogram, the time its woken tasks
// waited between their wake-up and their poll (RuntimeMetrics::scheduling_delay).
//
// What is timed: every woken task a worker takes from a queue (its wake queue, the global
// queue, a victim's wake queue), from the stamp its QueueItem carries (queue_item.hpp) to
// the moment the worker takes it. An expired timer's task is stamped with its deadline
// (DriverHost::deliver_late: the driver's reading minus how late it fired), so a driver
// that got to it late does not hide the wait. Tasks that run straight from the LIFO slot are not: they
// run as soon as the task that woke them suspends, and the time they spend there is that
// task's poll (a long one is counted by slow_polls, and the watchdog hands the slot's task to
// an idle worker). A task that the slot displaces, or that the slot's cap sends back, is
// stamped then. A poll that wakes several tasks stamps them all with the time of its first
// wake-up (one clock read per poll): a later one's wait is overstated by at most the rest of
// that poll.
//
// Cost, per timed task: a clock read when it is taken (about 19 ns here), a bucket index
// (a bit scan) and four owned-counter updates; per waking poll one clock read.
// Writer: the owning worker only (DurationRecorder: relaxed loads and stores, as
// OwnedCounter); readers: any thread, through snapshot().
#pragma once

#include "private.hpp"

#include <cstdint>

#include <eddy/runtime/detail/duration_recorder.hpp>

namespace eddy::detail {

/// Measures the scheduling clock's frequency once per process (Scheduler's constructor);
/// later calls return at once.
void calibrate_sched_ticks();
/// Scheduling-clock ticks to nanoseconds (after calibrate_sched_ticks()).
std::uint64_t sched_ticks_to_ns(std::uint64_t ticks) noexcept;
/// Nanoseconds to scheduling-clock ticks, the inverse (a timer's lateness as a stamp).
std::uint64_t sched_ns_to_ticks(std::uint64_t ns) noexcept;

/// The scheduling delay's recorder: durations given as two scheduling-clock readings.
class SchedDelayRecorder : public DurationRecorder {
public:
    /// Owner worker: one task waited from `stamp` to `now` (sched_ticks() readings; a
    /// reading of another core's clock a little ahead of ours counts as no wait).
    void record(std::uint64_t stamp, std::uint64_t now) noexcept {
        record_ns(now > stamp ? sched_ticks_to_ns(now - stamp) : 0);
    }
};

}  // namespace eddy::detail
