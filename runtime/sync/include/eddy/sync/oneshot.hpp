//! eddy/sync/oneshot.hpp: oneshot::channel<T>, a single value passed once from a Sender to
//! a Receiver (Tokio's oneshot).
//!
//!     auto [tx, rx] = eddy::oneshot::channel<int>();
//!     eddy::spawn(produce(std::move(tx)));   // ... tx.send(42);  from any thread
//!     int v = co_await rx;                   // suspends until the value (or the sender's end)
//!
//! Semantics:
//!   * Sender::send(v) never suspends. It may be called once: it consumes the sender's end, so
//!     a second send (or a send on a moved-from Sender) throws eddy::ChannelClosed, as does a
//!     send whose Receiver was dropped (the value is then dropped too).
//!   * `co_await rx` returns the value; it throws eddy::ChannelClosed if the Sender was
//!     dropped without sending (or the value was already received).
//!   * The receiving task is queued on a worker of the runtime it awaited from (the sender's
//!     own worker when that is the same runtime), never resumed inline inside send.
//!   * Both ends share one reference-counted state; either may be dropped first, on any thread.
//!
//! Who may call what: send and the destructors from any thread; `co_await rx` only from a
//! task on a runtime worker (eddy::WrongThread otherwise), one task at a time.
//!
//! Cancellation (eddy/tasks/cancellation.hpp): a receive cancelled while waiting resumes with
//! eddy::OperationCancelled and takes nothing: a value sent later stays in the channel for the
//! next `co_await rx`. If the value arrived first, the receive returns it. Awaiting with a
//! stopped token throws at once, even if the value is there.
//! @file
#pragma once

#include <atomic>
#include <mutex>
#include <optional>
#include <utility>

#include <eddy/tasks/detail/spin_lock.hpp>
#include <eddy/runtime/detail/wait_queue.hpp>
#include <eddy/tasks/errors.hpp>

namespace eddy::oneshot {

template <class T>
class Sender;
template <class T>
class Receiver;

namespace detail {

/// What the two ends share. Freed by whichever end drops the last reference.
template <class T>
struct State {
    eddy::detail::SpinLock lock;
    std::optional<T> value;      // guarded by lock
    bool sender_alive = true;    // guarded by lock
    bool receiver_alive = true;  // guarded by lock
    eddy::detail::WaitQueue waiters{lock};
    std::atomic<int> refs{2};

    /// Drops one end's reference.
    void release() noexcept {
        // Acq_rel: release publishes this end's last writes; acquire (for the last one)
        // makes the other end's visible before the state is destroyed.
        if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
    }
};

}  // namespace detail

template <class T>
/// The sending end: send() once, or drop it, which the receiver sees as ChannelClosed.
/// Move-only.
class Sender {
public:
    /// Moves the end; `o` is left empty (its send() throws ChannelClosed).
    Sender(Sender&& o) noexcept : state_(std::exchange(o.state_, nullptr)) {}
    /// Drops this end first (as its destructor would), then takes `o`'s.
    Sender& operator=(Sender&& o) noexcept {
        if (this != &o) {
            drop();
            state_ = std::exchange(o.state_, nullptr);
        }
        return *this;
    }
    Sender(const Sender&) = delete;
    Sender& operator=(const Sender&) = delete;
    ~Sender() { drop(); }

    /// Delivers `value` and wakes the receiver; never suspends; any thread. Throws
    /// eddy::ChannelClosed if the receiver is gone or this sender already sent (or is empty).
    void send(T value) {
        if (state_ == nullptr) throw ChannelClosed("eddy::oneshot::Sender::send: already sent (or moved from)");
        eddy::detail::WakeList wakes;
        bool delivered = false;
        {
            std::lock_guard guard(state_->lock);
            if (state_->receiver_alive) {
                state_->value.emplace(std::move(value));
                delivered = true;
            }
            state_->sender_alive = false;
            state_->waiters.grant_all(wakes);
        }
        wakes.wake_all();
        std::exchange(state_, nullptr)->release();
        if (!delivered) throw ChannelClosed("eddy::oneshot::Sender::send: the receiver was dropped");
    }

    /// False once the receiver was dropped (a snapshot: it may go at any moment).
    bool is_closed() const noexcept {
        if (state_ == nullptr) return true;
        std::lock_guard guard(state_->lock);
        return !state_->receiver_alive;
    }

private:
    template <class U>
    friend std::pair<Sender<U>, Receiver<U>> channel();
    explicit Sender(detail::State<T>* s) noexcept : state_(s) {}

    /// Gives up without sending: a waiting receiver wakes to ChannelClosed.
    void drop() noexcept {
        if (state_ == nullptr) return;
        eddy::detail::WakeList wakes;
        {
            std::lock_guard guard(state_->lock);
            state_->sender_alive = false;
            state_->waiters.grant_all(wakes);
        }
        wakes.wake_all();
        std::exchange(state_, nullptr)->release();
    }

    detail::State<T>* state_;
};

template <class T>
/// The receiving end: `co_await rx` gives the value, or throws ChannelClosed if the
/// sender was dropped without sending. Move-only.
class Receiver {
public:
    /// Moves the end; `o` is left empty.
    Receiver(Receiver&& o) noexcept : state_(std::exchange(o.state_, nullptr)) {}
    /// Drops this end first (a later send() then throws), then takes `o`'s.
    Receiver& operator=(Receiver&& o) noexcept {
        if (this != &o) {
            drop();
            state_ = std::exchange(o.state_, nullptr);
        }
        return *this;
    }
    Receiver(const Receiver&) = delete;
    Receiver& operator=(const Receiver&) = delete;
    ~Receiver() { drop(); }

    /// What `co_await rx` awaits.
    class [[nodiscard]] Awaiter : public eddy::detail::WaitAwaiter<Awaiter> {
    public:
        static constexpr const char* kWhat = "co_await on an eddy::oneshot::Receiver";
        static constexpr const char* kCancelled = "eddy::oneshot::Receiver: the wait was cancelled";

        /// Made by the receiver's operator co_await.
        explicit Awaiter(detail::State<T>& s) noexcept : eddy::detail::WaitAwaiter<Awaiter>(s.waiters), state_(s) {}
        /// Lock held: done once the value is there or the sender is gone.
        bool try_now(eddy::detail::WakeList&) const noexcept { return state_.value || !state_.sender_alive; }
        T await_resume() {
            this->finish_wait();
            // Granted: the sender has finished with the state, so no lock is needed.
            if (!state_.value)
                throw ChannelClosed(
                    "eddy::oneshot::Receiver: no value: the sender was dropped without sending, "
                    "or the value was already received");
            T v = std::move(*state_.value);
            state_.value.reset();
            return v;
        }

    private:
        detail::State<T>& state_;
    };

    /// `co_await rx`: the value. Throws eddy::ChannelClosed on an empty (moved-from) receiver.
    Awaiter operator co_await() {
        if (state_ == nullptr) throw ChannelClosed("eddy::oneshot::Receiver: empty (moved from)");
        return Awaiter(*state_);
    }

private:
    template <class U>
    friend std::pair<Sender<U>, Receiver<U>> channel();
    explicit Receiver(detail::State<T>* s) noexcept : state_(s) {}

    void drop() noexcept {
        if (state_ == nullptr) return;
        {
            std::lock_guard guard(state_->lock);
            state_->receiver_alive = false;
        }
        std::exchange(state_, nullptr)->release();
    }

    detail::State<T>* state_;
};

/// A connected pair: `auto [tx, rx] = eddy::oneshot::channel<T>();`
template <class T>
std::pair<Sender<T>, Receiver<T>> channel() {
    auto* s = new detail::State<T>();
    return {Sender<T>(s), Receiver<T>(s)};
}

}  // namespace eddy::oneshot
