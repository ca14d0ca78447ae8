// eddy/sync/detail/channel_end.hpp: EndRef, one end's counted reference to the state that
// a channel's ends share (watch, broadcast). Not for users: no stability promise.
//
// `State` has a SpinLock `lock` and `bool unused_locked() const` (true once no end is left).
// `Policy` says what an end of its kind counts, both called under that lock:
//   join(State&)             a copy of the end was made: one more (only if EndRef is copied)
//   leave(State&, WakeList&) the end is gone: one fewer; it may grant waiters (the last
//                            sender closes the channel), which are woken after unlocking.
// The end that leaves the state unused deletes it, after unlocking. An EndRef moved from
// (or a moved-from Sender/Receiver holding it) is empty: get() throws eddy::ChannelClosed.
#pragma once

#include <mutex>
#include <string>
#include <utility>

#include <eddy/runtime/detail/wait_queue.hpp>
#include <eddy/tasks/errors.hpp>

namespace eddy::detail {

template <class State, class Policy>
class EndRef {
public:
    /// Adopts a reference the caller has already counted (under the lock, or a new state).
    explicit EndRef(State* s) noexcept : state_(s) {}
    EndRef(const EndRef& o) noexcept : state_(o.state_) {
        if (state_ == nullptr) return;
        std::lock_guard guard(state_->lock);
        Policy::join(*state_);
    }
    EndRef& operator=(const EndRef& o) noexcept {
        if (this != &o) *this = EndRef(o);
        return *this;
    }
    EndRef(EndRef&& o) noexcept : state_(std::exchange(o.state_, nullptr)) {}
    EndRef& operator=(EndRef&& o) noexcept {
        if (this != &o) {
            reset();
            state_ = std::exchange(o.state_, nullptr);
        }
        return *this;
    }
    ~EndRef() { reset(); }

    /// The shared state; `what` names the call for the eddy::ChannelClosed thrown when this
    /// end is empty (moved from).
    State& get(const char* what) const {
        if (state_ == nullptr) throw ChannelClosed(std::string(what) + ": empty (moved from)");
        return *state_;
    }

    /// Leaves the state (see the file comment); the end is empty afterwards. Idempotent.
    void reset() noexcept {
        State* s = std::exchange(state_, nullptr);
        if (s == nullptr) return;
        WakeList wakes;
        bool last;
        {
            std::lock_guard guard(s->lock);
            Policy::leave(*s, wakes);
            last = s->unused_locked();
        }
        wakes.wake_all();
        if (last) delete s;  // no end left: nobody else can reach it
    }

private:
    State* state_;
};

/// The Policy of a receiving end whose State counts them in `receivers`.
struct CountedReceiver {
    template <class State>
    static void join(State& s) noexcept {
        ++s.receivers;
    }
    template <class State>
    static void leave(State& s, WakeList&) noexcept {
        --s.receivers;
    }
};

}  // namespace eddy::detail
