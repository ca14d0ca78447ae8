// io/timeout.cpp: the out-of-line parts of eddy/io/with_timeout.hpp.
#include <eddy/io/with_timeout.hpp>

#include <limits>
#include <vector>

namespace eddy::detail {
namespace {

/// Scopes that served a with_timeout whose task finished unstopped, kept for the next one on
/// this thread. A std::stop_source cannot be reset once stopped, and a shared token may be
/// held by anyone, so only scopes that were neither come back: reusing them is invisible.
/// Bounded: a thread that finished a burst of timeouts keeps at most kMax.
class ScopeCache {
public:
    static constexpr std::size_t kMax = 256;
    ~ScopeCache() {
        for (TimeoutScope* s : free_) delete s;
    }
    TimeoutScope* take() {
        if (free_.empty()) return new TimeoutScope;
        TimeoutScope* s = free_.back();
        free_.pop_back();
        return s;
    }
    void give(TimeoutScope* s) noexcept {
        if (free_.size() < kMax) {
            free_.push_back(s);  // reserved: no allocation
        } else {
            delete s;
        }
    }
    ScopeCache() { free_.reserve(kMax); }

private:
    std::vector<TimeoutScope*> free_;
};

ScopeCache& cache() {
    thread_local ScopeCache c;
    return c;
}

} // namespace

TimeoutScope* take_timeout_scope() { return cache().take(); }

void give_back_timeout_scope(TimeoutScope* s, bool timer_fired) noexcept {
    if (s == nullptr) return;
    if (timer_fired || s->source.stop_requested() || s->scope.shared.load(std::memory_order_relaxed)) {
        delete s;  // a copy held by the reactor (a timeout that fired) keeps the state alive
        return;
    }
    cache().give(s);
}

} // namespace eddy::detail
