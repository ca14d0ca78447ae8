// runtime/clock.cpp: RuntimeClock (clock.hpp). Its entry points (eddy::time, the Runtime's
// clock functions) are in time_api.cpp.
#include "clock.hpp"


#include <algorithm>
#include <stdexcept>
#include <string>

#include <eddy/tasks/errors.hpp>

namespace eddy::detail {

// Its own cache line: read at every timer arm, it must not share one with a written variable.
alignas(64) std::atomic<std::uint32_t> g_virtual_clocks{0};

RuntimeClock::RuntimeClock(ClockMode mode) noexcept : mode_(mode), now_(steady_now_ns()) {
    // Relaxed: see g_virtual_clocks (eddy/runtime/detail/clock.hpp).
    if (is_virtual()) g_virtual_clocks.fetch_add(1, std::memory_order_relaxed);
}

RuntimeClock::~RuntimeClock() {
    if (is_virtual()) g_virtual_clocks.fetch_sub(1, std::memory_order_relaxed);
}

void RuntimeClock::request(std::int64_t d_ns, std::coroutine_handle<> task, ThreadRequest* thread) {
    {
        std::lock_guard lock(lock_);
        if (closed_) throw RuntimeStopped("eddy::time::advance: the runtime is shut down");
        const std::int64_t now = now_.load(std::memory_order_relaxed);                // only the driver writes it
        const std::int64_t target = d_ns > kNone - 1 - now ? kNone - 1 : now + d_ns;  // saturated
        requests_.push_back({target, task, thread});
    }
    posted_.fetch_add(1, std::memory_order_seq_cst);  // see requests_posted()
}

std::int64_t RuntimeClock::earliest_target() const {
    std::lock_guard lock(lock_);
    std::int64_t t = kNone;
    for (const Request& r : requests_) t = std::min(t, r.target);
    return t;
}

void RuntimeClock::complete_due(std::vector<void*>& ready) {
    std::vector<ThreadRequest*> threads;
    {
        std::lock_guard lock(lock_);
        const std::int64_t now = now_.load(std::memory_order_relaxed);
        auto due = std::stable_partition(requests_.begin(), requests_.end(),
                                         [now](const Request& r) { return r.target > now; });
        for (auto it = due; it != requests_.end(); ++it) {
            if (it->task) ready.push_back(it->task.address());
            if (it->thread != nullptr) threads.push_back(it->thread);
        }
        requests_.erase(due, requests_.end());
    }
    for (ThreadRequest* t : threads) t->waiter.signal();  // the last touch: it may return now
}

void RuntimeClock::close() noexcept {
    std::vector<Request> left;
    {
        std::lock_guard lock(lock_);
        closed_ = true;
        left.swap(requests_);
    }
    for (const Request& r : left) {
        if (r.thread == nullptr) continue;  // a task: destroyed by shutdown with its frame
        r.thread->stopped = true;
        r.thread->waiter.signal();
    }
}

}  // namespace eddy::detail
