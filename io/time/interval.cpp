// io/time/interval.cpp: the out-of-line parts of eddy/time/interval.hpp.
#include <eddy/time/interval.hpp>

#include <string>

#include <eddy/tasks/errors.hpp>

namespace eddy {
namespace detail {

IntervalClaim::IntervalClaim(Interval& interval, const char* what) : interval_(&interval) {
    // Acquire: pairs with the release store of the previous claim's destructor.
    if (interval.claimed_.exchange(true, std::memory_order_acquire))
        throw std::logic_error(std::string(what) + ": a tick of this eddy::Interval is pending (one task at a time)");
}

IntervalClaim::~IntervalClaim() {
    // Release: publishes next_ and missed_ to the next claimer's acquire exchange.
    if (interval_ != nullptr) interval_->claimed_.store(false, std::memory_order_release);  // null: moved from
}

TickAwaiter::TickAwaiter(Interval& interval, std::stop_token token)
    : claim_(interval, "eddy::Interval::tick"), sleep_(interval.next_, std::move(token), "eddy::Interval::tick") {}

std::chrono::steady_clock::time_point TickAwaiter::await_resume() {
    // OperationCancelled: the schedule stays as it was.
    if (cancelled_) throw OperationCancelled("eddy::Interval::tick");
    sleep_.await_resume();
    return claim_.interval().take_tick(detail::clock_now());
}

}  // namespace detail

Interval::Interval(Clock::time_point start, Clock::duration period) : next_(start), period_(period) {
    if (period <= Clock::duration::zero()) throw std::invalid_argument("eddy::Interval: the period must be positive");
}

Interval::Interval(Interval&& other) noexcept : next_(other.next_), period_(other.period_), missed_(other.missed_) {}

Interval& Interval::operator=(Interval&& other) noexcept {
    next_ = other.next_;
    period_ = other.period_;
    missed_ = other.missed_;
    return *this;
}

void Interval::reset() {
    detail::IntervalClaim claim(*this, "eddy::Interval::reset");
    next_ = detail::saturating_add(detail::clock_now(), period_);
}

void Interval::set_missed_tick(MissedTick policy) {
    detail::IntervalClaim claim(*this, "eddy::Interval::set_missed_tick");
    missed_ = policy;
}

Interval::Clock::time_point Interval::take_tick(Clock::time_point now) noexcept {
    const Clock::time_point tick = next_;
    const Clock::time_point following = detail::saturating_add(tick, period_);
    if (now < following || missed_ == MissedTick::burst) {
        next_ = following;  // in time, or catching up one missed tick at a time
    } else if (missed_ == MissedTick::delay) {
        next_ = detail::saturating_add(now, period_);
    } else {
        // skip: the first tick + k * period after now. now >= following > tick, so the gap is
        // at least a period; taken in unsigned arithmetic, where it cannot overflow (a start
        // of time_point::min() is as far from now as the clock's range allows).
        const auto gap = static_cast<std::uint64_t>(now.time_since_epoch().count()) -
                         static_cast<std::uint64_t>(tick.time_since_epoch().count());
        const auto past = gap % static_cast<std::uint64_t>(period_.count());
        next_ = detail::saturating_add(now, period_ - Clock::duration(static_cast<Clock::rep>(past)));
    }
    return tick;
}

}  // namespace eddy
