// tests/support/stress_rounds.hpp: the round loop of the stress tests that sweep worker counts.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <cstddef>
#include <span>
#include <string>

#include "support/stress_env.hpp"
#include "support/watchdog.hpp"

namespace eddy::test {

/// Runs `body(workers)` for every worker count (EDDY_STRESS_WORKERS, else `worker_counts`),
/// `rounds` times each, each round under a Watchdog that names `program`, the test case, the
/// worker count and the round if the round hangs.
template <class Body>
void for_each_stress_configuration(const char* program, std::span<const std::size_t> worker_counts, int rounds,
                                   Body body) {
    const std::string name = doctest::getContextOptions()->currentTest != nullptr
                                 ? doctest::getContextOptions()->currentTest->m_name
                                 : "a test case";
    for (std::size_t workers : stress_worker_counts(worker_counts)) {
        for (int round = 0; round < rounds; ++round) {
            CAPTURE(workers);
            CAPTURE(round);
            Watchdog watchdog(
                program,
                "\"" + name + "\" with " + std::to_string(workers) + " workers, round " + std::to_string(round),
                std::chrono::minutes(3));
            body(workers);
        }
    }
}

}  // namespace eddy::test
