// eddy/tasks/detail/stop_state.hpp: eddy's own stop source, what every task's cancellation
// is made of. Not for users: the public face of a cancellation is a std::stop_token
// (this_task::stop_token(), TaskGroup::stop_token()), which StopState::token() bridges to.
//
// # Why not std::stop_source
// A std::stop_source allocates its shared state, and a std::stop_callback is 56 bytes (64 in
// a std::optional) whether or not it is ever registered. eddy registers a callback at every
// cancellable wait, inside the waiting frame (a Mutex wait, a socket read, a sleep), so every
// such frame paid those bytes, and every combinator that materialized its cancellation paid
// one allocation for the source and a callback on its parent. A StopState lives inline in
// whatever owns the cancellation (a combinator's frame, a with_timeout's scope, an abortable
// task's state): no allocation; a registration (StopCallback) is 40 bytes, intrusive (its
// links live in it), and a state can be reset for reuse once nothing is registered.
//
// # The protocol (the same guarantees as std::stop_source)
//   * request_stop(): the first call sets the flag, then runs every registered callback once,
//     on the calling thread, one at a time: each is unlisted, then run with the lock released.
//     Later calls return false and do nothing.
//   * StopCallback::emplace(state, f): registers f; when the state is stopped already, f runs
//     at once on the calling thread instead (and nothing is registered).
//   * StopCallback::reset() / its destructor: unregisters. If the callback is running on
//     another thread right now, waits until it has returned (so the callback never touches a
//     destroyed awaiter); if it is running on this thread (it resets itself), returns at once.
// A short spin lock in the state guards its list; callbacks never run under it, so a
// callback may register, unregister or stop other states (a combinator forwarding a stop to
// its children's state does).
#pragma once

#include <atomic>
#include <cassert>
#include <stop_token>
#include <thread>

namespace eddy::detail {

class StopState;

/// One registered callback: the intrusive part of a StopCallback.
class StopRegistration {
public:
    StopRegistration(const StopRegistration&) = delete;
    StopRegistration& operator=(const StopRegistration&) = delete;

    /// Unregisters (see the protocol above); does nothing when not registered.
    inline void reset() noexcept;

protected:
    using Fn = void (*)(StopRegistration* self) noexcept;
    explicit StopRegistration(Fn fn) noexcept : fn_(fn) {}
    ~StopRegistration() { reset(); }

    /// Registers on `s`, or runs the callback now when `s` is stopped.
    inline void attach(StopState& s) noexcept;

private:
    friend class StopState;
    // Guarded by state_'s lock while registered; pprev_ is null when not listed.
    StopRegistration* next_ = nullptr;
    StopRegistration** pprev_ = nullptr;
    Fn fn_;
    StopState* state_ = nullptr;  // owner's thread: where reset() must unregister
};

/// A callback `F` (a small function object: `void operator()() const noexcept`) run when a
/// StopState is stopped. Default-constructed: not registered.
template <class F>
class StopCallback final : public StopRegistration {
public:
    StopCallback() noexcept : StopRegistration(&run) {}
    ~StopCallback() { reset(); }

    /// Registers `f` on `s` (not registered before): it runs on the thread that stops `s`,
    /// or now, on this thread, if `s` is stopped already.
    void emplace(StopState& s, F f) noexcept {
        f_ = f;
        attach(s);
    }

private:
    static void run(StopRegistration* self) noexcept { static_cast<StopCallback*>(self)->f_(); }
    F f_{};
};

class StopState {
public:
    StopState() noexcept = default;
    StopState(const StopState&) = delete;
    StopState& operator=(const StopState&) = delete;
    ~StopState() { drop_bridge(); }

    /// Any thread. Acquire: pairs with request_stop()'s release store.
    bool stop_requested() const noexcept { return stopped_.load(std::memory_order_acquire); }

    /// Stops (see the protocol above); true when this call did. Any thread.
    bool request_stop() noexcept {
        lock();
        if (stopped_.load(std::memory_order_relaxed)) {  // relaxed: stored under this lock
            unlock();
            return false;
        }
        stopped_.store(true, std::memory_order_release);  // release: pairs with stop_requested()
        running_thread_ = std::this_thread::get_id();
        while (StopRegistration* r = head_) {
            unlink(*r);
            running_ = r;
            unlock();
            // From here on only r's owner may destroy r, and only after the call returned
            // (remove() waits for running_ to change), or from inside the call.
            r->fn_(r);
            lock();
            running_ = nullptr;
        }
        unlock();
        return true;
    }

    /// A std::stop_token that is stopped when this state is, for code outside eddy's tasks.
    /// It may outlive this state (then it is never stopped by it). The first call allocates
    /// a std::stop_source (std::bad_alloc ends the program: it is called from noexcept
    /// await_suspends, as an allocation failure in Tokio's runtime does). Any thread.
    std::stop_token token() noexcept {
        // Acquire: pairs with the CAS below, which publishes the bridge with its callback.
        Bridge* b = bridge_.load(std::memory_order_acquire);
        if (b == nullptr) {
            auto* fresh = new Bridge;  // NOLINT(bugprone-unhandled-exception-at-new): fatal here, as said above
            fresh->forward.emplace(*this, ForwardToStd{&fresh->source});  // registered first
            if (bridge_.compare_exchange_strong(b, fresh, std::memory_order_acq_rel, std::memory_order_acquire)) {
                b = fresh;
            } else {
                fresh->forward.reset();
                delete fresh;  // another thread's bridge is `b`
            }
        }
        return b->source.get_token();
    }

    /// Makes a state that nothing is registered on (every task under it has finished) new
    /// again, for reuse: not stopped, and tokens handed out before are detached from it.
    void reset() noexcept {
        drop_bridge();
        assert(head_ == nullptr && "StopState::reset with callbacks registered");
        stopped_.store(false, std::memory_order_relaxed);  // nothing else looks at it now
    }

private:
    friend class StopRegistration;

    struct ForwardToStd {
        std::stop_source* target;
        void operator()() const noexcept { target->request_stop(); }
    };
    struct Bridge {
        std::stop_source source;
        StopCallback<ForwardToStd> forward;
    };

    /// False (not registered) when stopped already.
    bool add(StopRegistration& r) noexcept {
        lock();
        if (stopped_.load(std::memory_order_relaxed)) {
            unlock();
            return false;
        }
        r.next_ = head_;
        if (head_ != nullptr) head_->pprev_ = &r.next_;
        r.pprev_ = &head_;
        head_ = &r;
        unlock();
        return true;
    }

    void remove(StopRegistration& r) noexcept {
        lock();
        if (r.pprev_ != nullptr) {
            unlink(r);
            unlock();
            return;
        }
        if (running_ != &r || running_thread_ == std::this_thread::get_id()) {
            unlock();  // ran already, or resets itself from inside its own call
            return;
        }
        unlock();
        for (;;) {  // running on another thread: wait until it returned (callbacks are short)
            std::this_thread::yield();
            lock();
            const bool still = running_ == &r;
            unlock();
            if (!still) return;
        }
    }

    void unlink(StopRegistration& r) noexcept {  // lock held
        *r.pprev_ = r.next_;
        if (r.next_ != nullptr) r.next_->pprev_ = r.pprev_;
        r.next_ = nullptr;
        r.pprev_ = nullptr;
    }

    void lock() noexcept {
        // Acquire: pairs with unlock()'s release, so each holder sees the previous one's writes.
        while (locked_.exchange(true, std::memory_order_acquire)) {
            while (locked_.load(std::memory_order_relaxed)) std::this_thread::yield();
        }
    }
    void unlock() noexcept { locked_.store(false, std::memory_order_release); }

    void drop_bridge() noexcept {
        // Acquire: pairs with token()'s CAS. Only the owner calls this, with no token() racing.
        if (Bridge* b = bridge_.exchange(nullptr, std::memory_order_acquire)) {
            b->forward.reset();
            delete b;
        }
    }

    std::atomic<bool> stopped_{false};
    std::atomic<bool> locked_{false};
    StopRegistration* head_ = nullptr;     // guarded by the lock
    StopRegistration* running_ = nullptr;  // guarded by the lock: the callback being run
    std::thread::id running_thread_;       // guarded by the lock: who runs it
    std::atomic<Bridge*> bridge_{nullptr};
};

/// A StopCallback that stops another state: how a stop is passed down a link (a combinator's
/// state under its parent's, a with_timeout's task under its awaiter's).
struct ForwardStop {
    StopState* target;
    void operator()() const noexcept { target->request_stop(); }
};

inline void StopRegistration::attach(StopState& s) noexcept {
    assert(state_ == nullptr && "StopCallback registered twice");
    if (s.add(*this)) {
        state_ = &s;
    } else {
        fn_(this);
    }
}

inline void StopRegistration::reset() noexcept {
    if (state_ != nullptr) {
        state_->remove(*this);
        state_ = nullptr;
    }
}

}  // namespace eddy::detail
