// runtime/watchdog.hpp: the reactor thread's look at the workers while they run: long polls
// and LIFO slots held by them.
//
// A worker publishes a poll sequence number (Worker::poll_seq: odd while it runs a queue item,
// one more at each start and end), with two relaxed stores per poll and nothing else. The
// reactor thread, which wakes every 0.2 ms (1 ms with nothing in its ring) while any worker
// is unparked, and is woken when a worker gives it something to watch (io/reactor/reactor.hpp),
// calls check() with the time; check() remembers, per worker, the
// sequence number it saw and since when. A number that is odd and has not moved is one poll
// that has run at least that long:
//   * past kStaleSlotNs with a task waiting in the worker's LIFO slot, the poll is marked
//     stale and an idle worker is woken (again at every look while the task waits there):
//     it may take the slot's task (Worker::steal_slot), so a child spawned before a long
//     computation does not wait for the computation;
//   * past RuntimeConfig::slow_poll_threshold (when set), the poll is counted
//     (WorkerMetrics::slow_polls) and reported once through RuntimeConfig::on_slow_poll, or
//     on_slow_poll_detail with the task's name and await site in task-dump builds (copied by
//     the worker at poll start, read here under the poll number: poll_site.hpp).
// Durations are measured from the first check that saw the poll, so they never overstate:
// a report comes up to one check interval late, never early.
#pragma once

#include <eddy/runtime/detail/owned_counter.hpp>
#include "private.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include <eddy/runtime/config.hpp>

namespace eddy::detail {

class Worker;

/// How long a poll runs before a task in its worker's LIFO slot may go to another worker. A
/// guess: long enough that request/response pairs keep their warm core, short next to the
/// computations that hold a slot hostage.
inline constexpr std::int64_t kStaleSlotNs = 500'000;

/// check() looks at most this often (the reactor may loop much faster under load).
inline constexpr std::int64_t kWatchIntervalNs = 100'000;

class Watchdog {
public:
    /// Watches `workers` (in index order) against `config`'s slow-poll threshold and hook;
    /// `wake_a_worker` wakes one parked worker to take a stale LIFO slot's task.
    Watchdog(const RuntimeConfig& config, std::vector<Worker*> workers, std::function<void()> wake_a_worker);
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;

    /// Reactor thread only. `now_ns`: steady_clock nanoseconds.
    void check(std::int64_t now_ns) noexcept;

    /// Any thread: slow polls reported for worker `i`.
    std::uint64_t slow_polls(std::size_t i) const noexcept { return seen_[i].slow_polls.get(); }

private:
    struct Seen {
        std::uint64_t seq = 0;
        std::int64_t since_ns = 0;  // when check() first saw `seq`
        bool slot_freed = false;    // this poll was marked stale
        bool reported = false;      // this poll was reported slow
        OwnedCounter slow_polls;    // written by the reactor thread
    };
    void report(std::size_t worker, std::uint64_t seq, std::int64_t running_ns) noexcept;

    const RuntimeConfig& config_;
    const std::vector<Worker*> workers_;
    const std::function<void()> wake_a_worker_;
    const std::int64_t threshold_ns_;  // 0: no reports
    std::int64_t last_check_ns_ = 0;
    std::vector<Seen> seen_;  // one per worker; sized at construction
};

}  // namespace eddy::detail
