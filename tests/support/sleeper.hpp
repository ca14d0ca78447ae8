// tests/support/sleeper.hpp: a task that only a cancellation ends, and one that cancels after a
// while, for the cancellation and combinator tests.
#pragma once

#include <atomic>
#include <chrono>
#include <stop_token>
#include <type_traits>

#include <eddy/time/sleep.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/counted.hpp"

namespace eddy::test {

/// Sleeps for an hour unless cancelled; its frame holds a Counted (so a test sees it end) and
/// it counts its cancellation before rethrowing it. Returns T{} if it ever wakes.
template <class T = int>
Task<T> sleeper(LifetimeCounter& frames, std::atomic<int>& cancelled) {
    Counted local(frames);
    try {
        co_await eddy::sleep(std::chrono::hours(1));
    } catch (const OperationCancelled&) {
        cancelled.fetch_add(1);
        throw;
    }
    if constexpr (!std::is_void_v<T>) co_return T{};
}

/// Requests `stop` after `d` (an eddy::sleep, so it runs beside the tasks it cancels).
inline Task<void> stop_after(std::chrono::milliseconds d, std::stop_source& stop) {
    co_await eddy::sleep(d);
    stop.request_stop();
}

}  // namespace eddy::test
