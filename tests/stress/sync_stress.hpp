// tests/stress/sync_stress.hpp: what the sync stress tests (sync_lock_stress, sync_channel_stress,
// sync_shutdown_stress) share: the worker counts and rounds every case runs for.
//
// Every case runs for 1, 2 and 8 workers (8 is more than the CI machine's cores, on purpose:
// preempted workers make the races between a grant and a stop request common), several
// rounds each, with a fresh Runtime per round. A Watchdog per round names the round that
// hangs (a lost wake-up) instead of a meson timeout.
#pragma once

#include "support/stress_rounds.hpp"

#include <cstddef>

namespace eddy::test::sync_stress {

#ifdef EDDY_TEST_TSAN
inline constexpr int kRounds = 3;
#else
inline constexpr int kRounds = 10;
#endif
inline constexpr std::size_t kWorkerCounts[] = {1, 2, 8};  // EDDY_STRESS_WORKERS overrides

/// Runs `body(workers)` for every worker count, kRounds times each, under a Watchdog that
/// names `program`.
template <class Body>
void for_each_configuration(const char* program, Body body) {
    for_each_stress_configuration(program, kWorkerCounts, kRounds, body);
}

}  // namespace eddy::test::sync_stress
