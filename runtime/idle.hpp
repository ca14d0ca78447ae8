// runtime/idle.hpp: which workers are searching for work, which are parked, whom to wake.
//
// The model is Tokio's multi-thread scheduler (tokio/src/runtime/scheduler/multi_thread/
// idle.rs). One atomic word holds two counts:
//   num_unparked   workers not parked (running a task or searching)
//   num_searching  unparked workers that have no task and are looking for one (stealing)
// and a lock-protected list holds the parked workers.
//
// Rules, with the reason for each:
//   1. New work wakes at most one parked worker, and only when no worker is searching
//      (worker_to_notify). A searcher will find the work; waking more would only make
//      them fight over it.
//   2. At most half the workers search at once (transition_to_searching): more thieves only
//      add contention on the victims' deques.
//   3. A searcher that finds work stops searching; if it was the last searcher it must wake
//      another worker (transition_from_searching returns true), because the work it found
//      may have come with more, and nobody else is looking.
//   4. A worker that parks must look at every queue once more after it is counted as parked,
//      and wake a worker if any has work. This closes the lost-wakeup window: a producer that
//      pushed after the worker's last look saw it unparked, or saw a searcher, and woke
//      nobody. Tokio does this for the last searcher only; eddy does it for every parking
//      worker, because a worker refused the searching role (rule 2) can otherwise park while
//      the only searcher, leaving searching with freshly stolen tasks, sees it still unparked
//      and wakes nobody: the tasks then wait for the one busy worker (found by a test that
//      ran two mutually waiting tasks 60,000 times). Parking costs a futex call anyway; the
//      extra look is a scan of the deques' top/bottom.
//
// Why the loads in rule 1 are seq_cst read-modify-writes: rule 1 is half of a store-buffering
// (Dekker) pattern. The producer pushes its task, then reads the idle state; the parking
// worker updates the idle state, then reads the queues. Both sides use an RMW on the same
// word, so the two RMWs are ordered in its modification order: either the producer's RMW
// comes later and sees the worker parked (and wakes it), or the worker's RMW reads from the
// producer's (synchronizes with it) and then sees the pushed task. A plain acquire load on the
// producer side would allow both to miss each other.
#pragma once

#include "private.hpp"
#include <eddy/tasks/detail/spin_lock.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace eddy::detail {

class Idle {
public:
    explicit Idle(std::size_t num_workers);

    /// Rule 1: the parked worker to wake for new work, or none. Removes it from the sleepers
    /// and counts it as unparked and searching.
    std::optional<std::size_t> worker_to_notify();

    /// Rule 2: false when enough workers search already (the caller then parks).
    bool transition_to_searching();

    /// Rule 3: true when the caller was the last searcher and must notify another worker.
    bool transition_from_searching();

    /// Records `worker` as parked (the caller then takes rule 4's last look); true when it
    /// was the last searcher.
    bool transition_to_parked(std::size_t worker, bool is_searching);

    /// After waking: true when the worker was taken off the sleeper list by a notifier
    /// (it is then counted as unparked and searching); false on a spurious wake-up.
    bool transition_from_parked(std::size_t worker);

    /// Shutdown: takes `worker` off the sleeper list if it is there.
    void unpark_for_shutdown(std::size_t worker);

    std::size_t num_searching() const noexcept;
    std::size_t num_unparked() const noexcept;

private:
    // State word layout: searching in the low 16 bits, unparked in the high 16 bits.
    static constexpr std::uint32_t kUnparkedShift = 16;
    static constexpr std::uint32_t kSearchMask = (1u << kUnparkedShift) - 1;
    static constexpr std::uint32_t kUnparkedOne = 1u << kUnparkedShift;

    bool should_wake() noexcept;

    const std::size_t num_workers_;
    alignas(64) std::atomic<std::uint32_t> state_;
    alignas(64) SpinLock sleepers_lock_;
    std::vector<std::size_t> sleepers_;  // guarded by sleepers_lock_
};

}  // namespace eddy::detail
