// tests/support/interval.hpp: what the Interval tests (tests/time/interval_*_test.cpp) share:
// Take, one tick as the consumer saw it (the clock before and after the co_await, and the time
// point the tick returned), and no_tick_within, which waits a while for a tick that must not
// come. `using namespace eddy::test::interval;` brings in the names the tests use.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <limits>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <eddy/time/interval.hpp>
#include <eddy/time/sleep.hpp>
#include <eddy/time/with_timeout.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/sync/mutex.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/time.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/runtime/when_any.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/counted.hpp"
#include "support/io_helpers.hpp"
#include "support/waiting.hpp"

namespace eddy::test::interval {

using eddy::Interval;
using eddy::MissedTick;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

/// One tick as the consumer saw it: the runtime's clock (eddy::time::now(), steady_clock on a
/// real clock) before the co_await, the time point the tick returned, and the clock after it.
/// The Interval read "now" somewhere in [before, after].
struct Take {
    Clock::time_point before;
    Clock::time_point at;
    Clock::time_point after;
};

inline Task<Take> take(Interval& iv) {
    Take t;
    t.before = eddy::time::now();
    t.at = co_await iv.tick();
    t.after = eddy::time::now();
    co_return t;
}

inline Task<Clock::time_point> tick_task(Interval& iv) { co_return co_await iv.tick(); }

/// Whether the next tick of `iv` is still to come after `d` (with_timeout gives up on it).
inline Task<bool> no_tick_within(Interval& iv, Clock::duration d) {
    try {
        (void)co_await eddy::with_timeout(tick_task(iv), d);
    } catch (const eddy::TimedOut&) {
        co_return true;
    }
    co_return false;
}

}  // namespace eddy::test::interval
