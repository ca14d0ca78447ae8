// runtime/clock.cpp: see runtime/clock.hpp and eddy/runtime/time.hpp.
#include "clock.hpp"

#include "scheduler.hpp"
#include "worker.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/time.hpp>
#include <eddy/tasks/errors.hpp>

namespace eddy::detail {

// Its own cache line: read at every timer arm, it must not share one with a written variable.
alignas(64) std::atomic<std::uint32_t> g_virtual_clocks{0};

std::int64_t runtime_now_ns() noexcept {
    Worker* w = current_worker();
    return w != nullptr ? w->scheduler().clock().now_ns() : steady_now_ns();
}

bool clock_is_virtual() noexcept {
    Worker* w = current_worker();
    return w != nullptr && w->scheduler().clock().is_virtual();
}

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
        const std::int64_t now = now_.load(std::memory_order_relaxed);  // only the driver writes it
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

namespace {

[[noreturn]] void throw_real(const char* what) {
    throw std::logic_error(std::string(what) +
                           ": the runtime's clock is real (RuntimeConfig::clock = ClockMode::paused or manual "
                           "makes it virtual)");
}

std::int64_t checked_ns(std::chrono::nanoseconds d, const char* what) {
    if (d < std::chrono::nanoseconds::zero())
        throw std::invalid_argument(std::string(what) + ": the duration is negative");
    return d.count();
}

} // namespace

} // namespace eddy::detail

namespace eddy {

void Runtime::advance(std::chrono::nanoseconds d) {
    constexpr const char* kWhat = "eddy::Runtime::advance";
    const std::int64_t ns = detail::checked_ns(d, kWhat);
    detail::RuntimeClock& clock = scheduler_->clock();
    if (!clock.is_virtual()) detail::throw_real(kWhat);
    if (detail::Worker* w = detail::current_worker(); w != nullptr && &w->scheduler() == scheduler_.get())
        throw WrongThread("eddy::Runtime::advance called from one of its own workers; co_await eddy::time::advance instead");
    detail::RuntimeClock::ThreadRequest request;
    clock.request(ns, {}, &request);
    scheduler_->wake_driver();
    request.waiter.wait();
    if (request.stopped) throw RuntimeStopped("eddy::Runtime::advance: the runtime shut down before the time was reached");
}

std::chrono::steady_clock::time_point Runtime::now() const noexcept {
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(scheduler_->clock().now_ns()));
}

bool Runtime::clock_is_virtual() const noexcept { return scheduler_->clock().is_virtual(); }

namespace time {

AdvanceAwaiter advance(std::chrono::nanoseconds d) {
    return AdvanceAwaiter(detail::checked_ns(d, "eddy::time::advance"));
}

void AdvanceAwaiter::await_suspend(std::coroutine_handle<> h) {
    detail::Scheduler& sched = detail::require_worker("eddy::time::advance");
    detail::RuntimeClock& clock = sched.clock();
    if (!clock.is_virtual()) detail::throw_real("eddy::time::advance");
    clock.request(ns_, h, nullptr);  // from here on `h` may be resumed: touch nothing of ours
    sched.wake_driver();
}

} // namespace time

} // namespace eddy
