// runtime/time_api.cpp: the runtime clock's entry points: eddy::time::now and advance, the
// Runtime's advance(), now() and clock_is_virtual(), and the calling thread's clock for the
// timers (eddy/runtime/detail/clock.hpp). They find the runtime of the caller or of the
// Runtime object; RuntimeClock itself (clock.cpp) knows no scheduler.
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

std::int64_t runtime_now_ns() noexcept {
    Worker* w = current_worker();
    return w != nullptr ? w->scheduler().clock().now_ns() : steady_now_ns();
}

bool clock_is_virtual() noexcept {
    Worker* w = current_worker();
    return w != nullptr && w->scheduler().clock().is_virtual();
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

}  // namespace

}  // namespace eddy::detail

namespace eddy {

void Runtime::advance(std::chrono::nanoseconds d) {
    constexpr const char* kWhat = "eddy::Runtime::advance";
    const std::int64_t ns = detail::checked_ns(d, kWhat);
    detail::RuntimeClock& clock = scheduler_->clock();
    if (!clock.is_virtual()) detail::throw_real(kWhat);
    if (detail::Worker* w = detail::current_worker(); w != nullptr && &w->scheduler() == scheduler_.get())
        throw WrongThread(
            "eddy::Runtime::advance called from one of its own workers; co_await eddy::time::advance instead");
    detail::RuntimeClock::ThreadRequest request;
    clock.request(ns, {}, &request);
    scheduler_->wake_driver();
    request.waiter.wait();
    if (request.stopped)
        throw RuntimeStopped("eddy::Runtime::advance: the runtime shut down before the time was reached");
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

}  // namespace time

}  // namespace eddy
