// tests/support/sync_helpers.hpp: helpers shared by the tests of the synchronization
// primitives (Mutex, Semaphore, Event, Latch, oneshot, Channel).
#pragma once

#include <atomic>
#include <exception>
#include <string>
#include <utility>

#include <eddy/sync/event.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::test {

/// Lets the other runnable tasks of this worker run until they suspend. On a one-worker
/// runtime this is exact: afterwards every task spawned before is waiting or finished.
inline Task<void> settle(int rounds = 4) {
    for (int i = 0; i < rounds; ++i) co_await eddy::yield_now();
}

/// How an awaited operation ended, as a word a CHECK can compare: "ok", "cancelled",
/// "closed", "wrong thread", or "other: <what>".
inline std::string describe(const std::exception_ptr& e) {
    if (!e) return "ok";
    try {
        std::rethrow_exception(e);
    } catch (const eddy::OperationCancelled&) {
        return "cancelled";
    } catch (const eddy::ChannelClosed&) {
        return "closed";
    } catch (const eddy::WrongThread&) {
        return "wrong thread";
    } catch (const std::exception& x) {
        return std::string("other: ") + x.what();
    }
}

/// Waits on `never` (which nobody sets), counting in `cancelled` the waits that ended by
/// cancellation (aborts, abort_all, group cancellation), then rethrows.
inline Task<int> wait_counting_cancel(Event& never, std::atomic<int>& cancelled) {
    try {
        co_await never;
    } catch (const eddy::OperationCancelled&) {
        cancelled.fetch_add(1);
        throw;
    }
    co_return 0;
}

/// Awaits `h` and describes how its task ended.
template <class T>
Task<std::string> outcome(JoinHandle<T> h) {
    std::exception_ptr e;
    try {
        co_await std::move(h);
    } catch (...) {
        e = std::current_exception();
    }
    co_return describe(e);
}

}  // namespace eddy::test
