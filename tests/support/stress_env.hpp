// tests/support/stress_env.hpp: EDDY_STRESS_WORKERS, the worker counts of the stress suite.
//
// EDDY_STRESS_WORKERS=2 (or a comma-separated list, 1,4) makes every stress test that starts a
// Runtime use those worker counts instead of its own: the tests that loop over worker counts
// (runtime_stress, runtime_shutdown_stress, sync_*_stress: 1, 2, 8) loop over the list; the tests whose rounds cycle
// through (workers, ring size) configurations (io_stress, structured_stress) keep the ring
// sizes and take the workers from the list, round by round. tools/eddy-stress --workers
// sets it. Unset or empty: the tests' own counts. A bad value throws std::invalid_argument.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/tsan.hpp"

namespace eddy::test {

/// The counts of EDDY_STRESS_WORKERS, or `defaults` when it is unset or empty.
inline std::vector<std::size_t> stress_worker_counts(std::span<const std::size_t> defaults = {}) {
    const char* v = std::getenv("EDDY_STRESS_WORKERS");
    if (v == nullptr || *v == '\0') return {defaults.begin(), defaults.end()};
    std::vector<std::size_t> counts;
    const std::string text(v);
    for (std::size_t pos = 0; pos <= text.size();) {
        std::size_t comma = text.find(',', pos);
        if (comma == std::string::npos) comma = text.size();
        const std::string item = text.substr(pos, comma - pos);
        char* end = nullptr;
        const long n = item.empty() ? 0 : std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || n < 1 || n > 256)
            throw std::invalid_argument("EDDY_STRESS_WORKERS must be worker counts 1..256, comma-separated (got \"" +
                                        text + "\")");
        counts.push_back(static_cast<std::size_t>(n));
        pos = comma + 1;
    }
    return counts;
}

/// The worker count of round `round`: `configured` unless EDDY_STRESS_WORKERS is set.
inline std::size_t stress_workers(std::size_t configured, int round) {
    static const std::vector<std::size_t> counts = stress_worker_counts();
    return counts.empty() ? configured : counts[static_cast<std::size_t>(round) % counts.size()];
}

}  // namespace eddy::test
