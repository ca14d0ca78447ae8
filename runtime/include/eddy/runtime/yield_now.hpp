//! eddy/runtime/yield_now.hpp: eddy::yield_now, letting the other runnable tasks go first.
//! @file
#pragma once

#include <coroutine>

#include <eddy/runtime/detail/scheduler_api.hpp>

namespace eddy {

/// `co_await eddy::yield_now();` suspends the current task and queues it behind every other
/// task that is runnable on this worker (its deque and the global queue); idle workers may
/// steal it meanwhile. Throws eddy::WrongThread off a worker thread.
class YieldNow {
public:
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> self) const { detail::defer_current(self); }
    void await_resume() const noexcept {}
    void dump_wait(detail::DumpWait& d) const { d.text("yield_now"); }
};

/// The YieldNow to `co_await`.
[[nodiscard]] inline YieldNow yield_now() noexcept { return {}; }

}  // namespace eddy
