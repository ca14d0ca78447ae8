// runtime/queue_item.hpp: what the run queues hold: a task, and when it was woken.
//
// Every queue of the scheduler (a worker's wake queue and spawn deque, the global queue) holds
// QueueItems. `task` is a frame's address or a tagged Runnable (scheduler_api.hpp). `stamp`
// says how the task became runnable:
//   * 0: it was spawned (or it yielded): new work, which waits behind woken tasks and runs
//     newest first on its worker (worker.hpp);
//   * otherwise: it was woken, at that reading of the scheduling clock below; the worker
//     that polls it adds the wait to its scheduling-delay histogram (metrics.hpp), and it
//     runs oldest first.
//
// # The scheduling clock (sched_ticks)
// The time-stamp counter on x86-64 (invariant and synchronized across cores on every CPU
// that Linux runs with constant_tsc, the only ones eddy is measured on); its frequency is
// measured once per process against the steady clock (runtime/sched_delay.cpp). A read
// costs about 19 ns on this project's machine (an EPYC under KVM), against 52 ns for
// steady_clock::now(), so the scheduler reads it at most once per poll: a poll that wakes a
// hundred tasks stamps them all with one reading (Worker::stamp). Elsewhere the steady
// clock, in nanoseconds. Never 0 (bit 0 is forced), so that a stamp is never mistaken for
// a spawn.
#pragma once

#include "private.hpp"

#include <chrono>
#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace eddy::detail {

struct QueueItem {
    void* task = nullptr;
    std::uint64_t stamp = 0;  // 0: spawned; else woken at this sched_ticks() reading

    bool woken() const noexcept { return stamp != 0; }
    friend bool operator==(const QueueItem&, const QueueItem&) = default;
};

/// The scheduling clock (see above): monotonic, never 0.
inline std::uint64_t sched_ticks() noexcept {
#if defined(__x86_64__)
    return __rdtsc() | 1;
#else
    return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) | 1;
#endif
}

}  // namespace eddy::detail
