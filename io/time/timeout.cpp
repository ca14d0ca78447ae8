// io/time/timeout.cpp: the out-of-line parts of eddy/time/with_timeout.hpp.
#include <eddy/time/with_timeout.hpp>

#include <vector>

namespace eddy::detail {
namespace {

/// Scopes that served a with_timeout, kept for the next one on this thread. A scope comes
/// back when its with_timeout drops the last reference (its timer did not fire, or the
/// reactor is done with it), made new again: a StopState can be reset once nothing is
/// registered on it, and tokens shared from it are detached by the reset. Bounded: a thread
/// that finished a burst of timeouts keeps at most kMax.
class ScopeCache {
public:
    static constexpr std::size_t kMax = 256;
    ScopeCache() { free_.reserve(kMax); }
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

private:
    std::vector<TimeoutScope*> free_;
};

// This thread's cache, made on first use. A with_timeout may give its scope back after the
// thread's thread_locals are gone (a Runtime destroyed during static destruction destroys
// its unfinished frames on that thread), or when the cache cannot be made (no memory, in
// noexcept code): then there is none, and scopes are simply freed.
[[gnu::tls_model("initial-exec")]] constinit thread_local ScopeCache* t_cache = nullptr;
[[gnu::tls_model("initial-exec")]] constinit thread_local bool t_cache_gone = false;

struct CacheOwner {
    ScopeCache cache;
    ~CacheOwner() {
        t_cache = nullptr;
        t_cache_gone = true;
    }
};

ScopeCache* cache() noexcept {
    if (t_cache != nullptr || t_cache_gone) return t_cache;
    try {
        thread_local CacheOwner owner;
        t_cache = &owner.cache;
    } catch (...) {
        return nullptr;  // std::bad_alloc reserving: no cache on this thread for now
    }
    return t_cache;
}

/// Drops one reference; true when it was the last.
bool release(TimeoutScope* s) noexcept { return s->refs.fetch_sub(1, std::memory_order_acq_rel) == 1; }

}  // namespace

TimeoutScope* take_timeout_scope() {
    if (ScopeCache* c = cache()) return c->take();
    return new TimeoutScope;
}

void give_back_timeout_scope(TimeoutScope* s) noexcept {
    if (s == nullptr || !release(s)) return;  // the reactor frees it (fire_timeout)
    s->state.reset();
    s->refs.store(1, std::memory_order_relaxed);  // ours alone again
    if (ScopeCache* c = cache()) {
        c->give(s);
    } else {
        delete s;
    }
}

void retain_timeout(TimeoutScope* s) noexcept { s->refs.fetch_add(1, std::memory_order_relaxed); }

void fire_timeout(TimeoutScope* s) noexcept {
    s->state.request_stop();
    if (release(s)) delete s;  // the with_timeout is gone: not a worker's cache to give it to
}

}  // namespace eddy::detail
