// tests/support/notify_probe.hpp: spend_permit(), how the tests of eddy::Notify see whether a
// permit is stored (Notify has no try_ operation to ask).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <utility>

#include <eddy/runtime/join_handle.hpp>
#include <eddy/sync/notify.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/task.hpp>

#include "support/waiting.hpp"

namespace eddy::test {

/// Whether a permit is stored, found by spending it: a fresh waiter either returns at once
/// ("permit": it is gone now) or queues ("none": it is then notified and reaped). Any number
/// of workers; the caller makes sure nobody else waits or notifies meanwhile. Polls with
/// yields, bounded: "lost" if neither happened in time (a hang, really).
inline Task<std::string> spend_permit(Notify& n) {
    const std::size_t before = n.waiters();
    JoinHandle<void> probe = eddy::spawn([](Notify& notify) -> Task<void> { co_await notify.notified(); }(n));
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (!probe.is_finished() && n.waiters() == before) {
        if (past(deadline)) co_return "lost";
        co_await eddy::yield_now();
    }
    if (probe.is_finished()) {
        co_await std::move(probe);
        co_return "permit";
    }
    n.notify_one();  // it queued: let it go (it is the only waiter)
    co_await std::move(probe);
    co_return "none";
}

}  // namespace eddy::test
