// runtime/worker_pause.hpp: stopping every worker between two polls, for a task dump.
//
// A dump (runtime/task_dump.cpp) must read suspended frames while no worker can resume or
// destroy them. So the dumper makes the pause generation odd, wakes every worker, and waits
// until each has acknowledged at a pause point: a worker calls point() before each poll and
// each time it wakes in park(), and there acknowledges and waits for the generation to move
// on. A dump from a task (eddy::dump_tasks) runs on a worker in the middle of its poll: it
// waits for the others only. Dumpers take turns; one waiting for its turn on a worker
// acknowledges the running dump meanwhile, so two dumping tasks cannot wait for each other.
// If the runtime starts shutting down meanwhile the dump gives up (workers leaving their run
// loop never acknowledge).
//
// Cost when nobody dumps: one relaxed load of gen_ per poll, on a line the workers only read.
#pragma once

#include "runtime/private.hpp"

#include <atomic>
#include <cstdint>
#include <mutex>

namespace eddy::detail {

class Scheduler;

class WorkerPause {
public:
    /// A worker, between two polls and after each wake in park().
    void point() noexcept {
        // Relaxed: a hint; wait_out() reads it again with acquire. The dumper wakes every
        // worker after making it odd, so a parked one reaches this line and sees it.
        if ((gen_.load(std::memory_order_relaxed) & 1) != 0) [[unlikely]]
            wait_out();
    }

    /// The dumper: pauses every worker of `sched` but the calling one when `from_worker`.
    /// False (nothing paused) when the runtime started shutting down first.
    bool pause(Scheduler& sched, bool from_worker);
    /// The dumper, after a successful pause(): lets the workers go.
    void resume() noexcept;

private:
    void wait_out() noexcept;

    std::mutex dumpers_;  // one dump at a time (try_lock only: see pause())
    // Odd while a dump wants the workers paused. Release increments (resume) pair with the
    // acquire load and wait in wait_out(); the seq_cst increment in pause() is ordered before
    // the unparks that make parked workers look.
    alignas(64) std::atomic<std::uint32_t> gen_{0};
    // Acknowledgements of the current generation: release increments by the workers (their
    // writes to the frames they ran happen before the walk) pair with pause()'s acquire loads.
    alignas(64) std::atomic<std::uint32_t> acks_{0};
};

} // namespace eddy::detail
