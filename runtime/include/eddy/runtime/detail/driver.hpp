// eddy/runtime/detail/driver.hpp: the seam between the scheduler and the I/O driver above it.
// Not for users: no stability promise.
//
// The runtime layer never includes the I/O layer, and the I/O layer never sees the scheduler's
// private headers (each layer's private include root is its own: see docs/design/layers.md).
// They meet here, in both directions:
//   - Driver: what the scheduler asks of its driver (start, flush, wake, shut down...). A
//     Runtime owns one, created after the scheduler and shut down between the scheduler's
//     shutdown steps 2 and 3 (workers joined, frames not yet destroyed), so that no operation
//     in flight outlives its frame.
//   - DriverHost: what the scheduler offers its driver, and nothing more: its configuration,
//     which worker the calling thread is, the hand-over of woken tasks, the few figures the
//     driver's sleep decisions read, the watchdog's check, and the runtime's clock.
// make_driver() is declared here and defined by the I/O layer (io/reactor/reactor.cpp): the
// one reference that points upwards, resolved when libeddy is linked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

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
    /// Worker thread: the watchdog has something to watch; a driver that stopped looking at
    /// the workers while all were parked (DriverHost::set_unwatched) must look again.
    virtual void watch() noexcept = 0;
    /// Any thread: wakes the driver's thread if it sleeps (a virtual clock's advance()
    /// request waits for it).
    virtual void wake() noexcept = 0;
    /// Called once, with every worker joined: cancels what is in flight, waits for the
    /// kernel to let go of every buffer, and stops the driver's thread. Resumes nothing.
    virtual void shutdown() noexcept = 0;
    /// Any thread: the driver's figures for Runtime::metrics().
    virtual ReactorMetrics metrics() const noexcept = 0;
    /// Any thread: the kernel interface it drives (ReactorMetrics::driver, TaskDump::driver).
    virtual IoDriver kind() const noexcept = 0;
};

/// The scheduler as its driver sees it. One per runtime, owned by the scheduler and handed
/// to make_driver(); it outlives the driver.
class DriverHost {
public:
    /// current_worker_index() off this runtime's workers.
    static constexpr std::size_t kNotAWorker = static_cast<std::size_t>(-1);
    /// The earliest clock target when none is pending (clock_earliest_target()).
    static constexpr std::int64_t kNoTarget = std::numeric_limits<std::int64_t>::max();

    explicit DriverHost(Scheduler& sched) noexcept : sched_(sched) {}
    DriverHost(const DriverHost&) = delete;
    DriverHost& operator=(const DriverHost&) = delete;

    /// The scheduler, as the opaque handle the entry points of scheduler_api.hpp take
    /// (schedule_on: a timer's waiter goes back to its runtime).
    Scheduler& scheduler() const noexcept { return sched_; }

    // --- configuration and threads ---
    /// The configuration this runtime was built with (validated).
    const RuntimeConfig& config() const noexcept;
    std::size_t num_workers() const noexcept;
    /// The name of this runtime's thread playing `role` (RuntimeConfig::thread_name).
    std::string thread_name(std::string_view role) const;
    /// Runs RuntimeConfig::on_thread_start / on_thread_stop (`which` names it in the report
    /// of an exception, which is swallowed).
    static void run_thread_hook(const std::function<void()>& hook, const char* which) noexcept;
    /// Names the calling thread (the driver's, as it starts).
    static void name_this_thread(const std::string& name) noexcept;

    // --- the calling thread ---
    /// The index of the calling thread among this runtime's workers, or kNotAWorker.
    std::size_t current_worker_index() const noexcept;
    /// A worker of this runtime posted work for the driver: its next flush() must not be
    /// skipped. Precondition: the caller is one of this runtime's workers.
    static void note_driver_work() noexcept;

    // --- handing over ---
    /// Driver thread only: queues `n` woken tasks (frames or tagged runnables) on the global
    /// wake queue in one bulk push, and wakes a worker if none is searching.
    void deliver(void* const* items, std::size_t n) noexcept;
    /// Driver thread only: as deliver(), for items that became runnable before now: item i
    /// `late_ns[i]` nanoseconds ago (an expired timer, since its deadline). Their scheduling
    /// delay (RuntimeMetrics::scheduling_delay) counts from then.
    void deliver_late(void* const* items, const std::int64_t* late_ns, std::size_t n) noexcept;

    // --- what the driver's sleep decisions read ---
    /// Workers not parked (relaxed snapshot).
    std::size_t unparked_workers() const noexcept;
    /// spawn_blocking calls queued or running.
    std::size_t blocking_busy() const noexcept;
    /// Tasks in the global queues (an estimate).
    std::size_t global_depth() const noexcept;
    /// Whether the driver sleeps without looking at the workers (it went to sleep with every
    /// worker parked): seq_cst, paired with the workers' seq_cst load (worker.hpp).
    void set_unwatched(bool v) noexcept;
    /// Driver thread, at each batch: the watchdog's look at long polls and held LIFO slots.
    void check_watchdog(std::int64_t now_ns) noexcept;

    // --- the runtime's clock (virtual time: the driver moves it when the runtime is quiet) ---
    bool clock_is_virtual() const noexcept;
    /// Paused mode: the clock jumps to the next timer by itself.
    bool clock_auto_advance() const noexcept;
    std::int64_t clock_now_ns() const noexcept;
    void clock_set_now(std::int64_t t) noexcept;
    /// Held around the driver's last look at the runtime and its move of the clock: a worker
    /// leaving park waits for it before it runs anything (runtime/clock.hpp).
    void clock_lock_jumps() noexcept;
    void clock_unlock_jumps() noexcept;
    /// The earliest target of a pending advance() request, or kNoTarget.
    std::int64_t clock_earliest_target() const;
    /// Appends the waiters of every advance() request that is due to `ready`.
    void clock_complete_due(std::vector<void*>& ready);
    /// Advance requests posted so far (seq_cst: the driver's second look before sleeping).
    std::uint64_t clock_requests_posted() const noexcept;

private:
    Scheduler& sched_;
};

/// Builds the I/O driver of the runtime behind `host` (io/reactor/reactor.cpp). Throws
/// std::system_error when the kernel interface it needs is unavailable, std::invalid_argument
/// for a configuration it refuses.
std::unique_ptr<Driver> make_driver(DriverHost& host);

/// The driver of the runtime whose worker calls; eddy::WrongThread naming `what` elsewhere.
Driver& require_driver(const char* what);
/// The same, or nullptr off a worker.
Driver* this_thread_driver() noexcept;

}  // namespace eddy::detail
