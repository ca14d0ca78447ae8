// runtime/driver.hpp: the seam between the scheduler and the I/O driver above it.
//
// runtime/ never includes io/: the scheduler only knows that a Runtime owns one Driver,
// created after the scheduler and shut down between shutdown steps 2 and 3 (workers joined,
// frames not yet destroyed), so that no in-flight operation outlives its frame.
// make_driver() is declared here and defined by io/reactor.cpp: the one reference that points
// upwards, resolved when the eddy library is linked.
#pragma once

#include "runtime/private.hpp"

#include <memory>

#include <eddy/runtime/config.hpp>
#include <eddy/runtime/metrics.hpp>

namespace eddy::detail {

class Scheduler;

class Driver {
public:
    virtual ~Driver() = default;
    /// Starts the driver's thread. Throws std::system_error (nothing left running) on failure.
    virtual void start() = 0;
    /// Worker thread, between tasks: makes the driver act on what this thread posted since
    /// its last flush. Workers call it whenever they run out of local work (before stealing
    /// or parking) and every few tasks, so a posted operation never waits long.
    virtual void flush() noexcept = 0;
    /// Worker thread: the caller found no work and is about to spin for some (`parked`
    /// false) or has just parked (true). A driver that holds completions back to hand them
    /// over in batches must stop waiting. True when it will hand some over now.
    virtual bool worker_out_of_work(bool parked) noexcept = 0;
    /// Worker thread: the watchdog (runtime/watchdog.hpp) has something to watch; a driver
    /// that stopped looking at the workers while all were parked (Scheduler::unwatched_flag())
    /// must look again.
    virtual void watch() noexcept = 0;
    /// Any thread: wakes the driver's thread if it sleeps (a virtual clock's advance()
    /// request waits for it: runtime/clock.hpp).
    virtual void wake() noexcept = 0;
    /// Called once, with every worker joined: cancels what is in flight, waits for the
    /// kernel to let go of every buffer, and stops the driver's thread. Resumes nothing.
    virtual void shutdown() noexcept = 0;
    /// Any thread: the driver's figures for Runtime::metrics().
    virtual ReactorMetrics metrics() const noexcept = 0;
};

/// Builds the I/O driver of `sched` (io/reactor.cpp). Throws std::system_error when the
/// kernel interface it needs is unavailable.
std::unique_ptr<Driver> make_driver(Scheduler& sched, const RuntimeConfig& config);

} // namespace eddy::detail
