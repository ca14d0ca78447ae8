// eddy/sync/broadcast.hpp: broadcast::channel<T>(capacity), a bounded multi-producer
// multi-consumer channel where every receiver gets every value (Tokio's broadcast).
//
//     auto [tx, rx] = eddy::broadcast::channel<Event>(64);   // a ring of 64 values
//     auto rx2 = tx.subscribe();                  // sees the values sent from now on
//     std::size_t n = tx.send(ev);                // any thread, never waits: n receivers
//     try {
//         while (std::optional<Event> ev = co_await rx.receive()) use(*ev);  // nullopt: closed
//     } catch (const eddy::broadcast::Lagged& lag) { ... lag.missed() values were lost ... }
//
// Semantics:
//   * The values sent live in a ring of `capacity` slots. Each receiver has its own position
//     and gets a copy of every value sent after it subscribed, in the order they were sent
//     (one order for all receivers: the order in which the sends took the channel's lock).
//   * send(v) never waits: when the ring is full it overwrites the oldest value, even if some
//     receiver has not read it yet. It returns the number of receivers at that moment; with
//     none it returns 0 and drops the value (no receiver could ever read it).
//   * A receiver that fell more than `capacity` values behind has lost the ones overwritten:
//     its next receive (or try_receive) throws eddy::broadcast::Lagged, whose missed() is
//     exactly how many it lost, and moves it to the oldest value still in the ring, which
//     the receive after that returns. Lag is an exception, not a result, so that a plain
//     `while (auto v = co_await rx.receive())` loop cannot silently skip values; catch it
//     and go on receiving to tolerate gaps.
//   * Closing: once every Sender is gone (destroyed or moved-onto), a receiver first gets
//     what remains for it in the ring, then std::nullopt (end of stream; Lagged first if it
//     had fallen behind). Receivers waiting at that moment get std::nullopt.
//   * A value stays in the ring until a later send overwrites it (or the channel is freed),
//     even once every receiver has copied it.
//   * A woken task is queued on a worker of the runtime it awaited from (the sender's own
//     worker when that is the same runtime), never resumed inline inside send.
//   * T must be copyable (each receiver gets its own copy) and nothrow-move-constructible and
//     -assignable (values move into the ring under the channel's lock). Copies are made under
//     that lock too: for large values use broadcast::channel<std::shared_ptr<const V>>.
//   * One SpinLock per channel and a ring allocated once: no allocation per message (beyond
//     what T's own copy allocates).
//
// Who may call what: send, subscribe, receiver_count (Sender), try_receive, resubscribe,
// is_closed, len, is_empty (Receiver) and the destructors from any thread;
// `co_await rx.receive()` only from a task on a runtime worker (eddy::WrongThread
// otherwise). Senders are copyable (each copy keeps the channel open); Receivers are
// move-only (resubscribe() makes another) and are used by one task at a time. The state is
// freed with the last end. channel(0) throws std::invalid_argument; using a moved-from end
// throws eddy::ChannelClosed.
//
// Cancellation (eddy/tasks/cancellation.hpp): a receive cancelled while waiting resumes with
// eddy::OperationCancelled and consumes nothing: the receiver's position is unchanged, so the
// next receive returns the value the cancelled one would have. If a value (or the close)
// arrived before the cancel took effect, it returns normally instead (or throws Lagged).
// Awaiting with a stopped token throws at once, even if a value is there.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <eddy/sync/detail/channel_end.hpp>
#include <eddy/tasks/detail/spin_lock.hpp>
#include <eddy/runtime/detail/wait_queue.hpp>
#include <eddy/tasks/errors.hpp>

namespace eddy::broadcast {

/// A receiver fell behind and `missed()` values were overwritten before it read them. It has
/// moved on to the oldest value still in the ring; receive again to get it.
class Lagged : public std::runtime_error {
public:
    /// The receiver missed `missed` values.
    explicit Lagged(std::uint64_t missed)
        : std::runtime_error("eddy::broadcast::Receiver: lagged behind, " + std::to_string(missed) +
                             " values were overwritten before they were received"),
          missed_(missed) {}
    /// How many values were overwritten before this receiver read them.
    std::uint64_t missed() const noexcept { return missed_; }

private:
    std::uint64_t missed_;
};

template <class T>
class Sender;
template <class T>
class Receiver;

namespace detail {

/// What the ends share. Freed by whichever end drops the last reference.
template <class T>
struct State {
    static_assert(std::is_copy_constructible_v<T>, "eddy::broadcast: T must be copyable (each receiver gets a copy)");
    static_assert(std::is_nothrow_move_constructible_v<T> && std::is_nothrow_move_assignable_v<T>,
                  "eddy::broadcast: T must be nothrow-movable (values move into the ring under a lock)");

    explicit State(std::size_t cap) : capacity(cap), slots(new std::optional<T>[cap]) {}

    eddy::detail::SpinLock lock;
    const std::size_t capacity;
    // guarded by lock: position p (the p-th value sent) is in slots[p % capacity] while
    // oldest() <= p < tail; those slots hold a value.
    std::unique_ptr<std::optional<T>[]> slots;
    std::uint64_t tail = 0;     // guarded by lock: the values sent so far
    std::size_t senders = 1;    // guarded by lock
    std::size_t receivers = 1;  // guarded by lock
    eddy::detail::WaitQueue waiters{lock};

    /// lock held: the position of the oldest value still in the ring.
    std::uint64_t oldest() const noexcept { return tail > capacity ? tail - capacity : 0; }
    /// lock held: true when no end is left (the caller deletes the state after unlocking).
    bool unused_locked() const noexcept { return senders == 0 && receivers == 0; }
};

/// What a receiver's look at the ring found.
enum class Poll : std::uint8_t { empty, value, lagged, closed };

}  // namespace detail

/// Move-only (resubscribe() makes another receiver).
template <class T>
class Receiver {
public:
    /// Takes the other's place in the channel; the moved-from receiver throws ChannelClosed.
    Receiver(Receiver&&) noexcept = default;
    /// Leaves this receiver's channel, takes the other's place.
    Receiver& operator=(Receiver&&) noexcept = default;
    Receiver(const Receiver&) = delete;
    Receiver& operator=(const Receiver&) = delete;

    /// What receive() returns: awaiting it gives the next value (see receive()).
    class [[nodiscard]] ReceiveAwaiter : public eddy::detail::WaitAwaiter<ReceiveAwaiter> {
    public:
        static constexpr const char* kWhat = "co_await on eddy::broadcast::Receiver::receive()";
        static constexpr const char* kCancelled = "eddy::broadcast::Receiver::receive: the wait was cancelled";

        /// Made by receive().
        ReceiveAwaiter(Receiver& rx, detail::State<T>& s) noexcept
            : eddy::detail::WaitAwaiter<ReceiveAwaiter>(s.waiters), rx_(rx), state_(s) {}
        /// Movable until first awaited (WaitAwaiter asserts it): nothing was polled yet.
        ReceiveAwaiter(ReceiveAwaiter&& o) noexcept
            : eddy::detail::WaitAwaiter<ReceiveAwaiter>(std::move(o)), rx_(o.rx_), state_(o.state_) {}
        ReceiveAwaiter(const ReceiveAwaiter&) = delete;
        ReceiveAwaiter& operator=(const ReceiveAwaiter&) = delete;

        /// Lock held: a value, a lag or the end of the stream ends the wait. A copy that
        /// throws is rethrown by await_resume (nothing consumed).
        bool try_now(eddy::detail::WakeList&) noexcept {
            try {
                poll_ = rx_.poll_locked(state_, item_, missed_);
            } catch (...) {
                error_ = std::current_exception();
                return true;
            }
            return poll_ != detail::Poll::empty;
        }

        std::optional<T> await_resume() {
            this->finish_wait();
            if (error_) std::rethrow_exception(error_);
            if (poll_ == detail::Poll::empty) {
                // Woken by a send or the close: both last (the tail only grows, the senders
                // never come back), so this look finds a value, a lag or the end.
                std::lock_guard guard(state_.lock);
                poll_ = rx_.poll_locked(state_, item_, missed_);
            }
            return rx_.outcome(poll_, std::move(item_), missed_);
        }

    private:
        Receiver& rx_;
        detail::State<T>& state_;
        detail::Poll poll_ = detail::Poll::empty;
        std::optional<T> item_;
        std::uint64_t missed_ = 0;
        std::exception_ptr error_;
    };

    /// `co_await rx.receive()`: the next value for this receiver, suspending while there is
    /// none; std::nullopt once every sender is gone and the receiver has drained; throws
    /// eddy::broadcast::Lagged after values were lost (see the file comment).
    ReceiveAwaiter receive() { return ReceiveAwaiter(*this, state_.get("eddy::broadcast::Receiver::receive")); }

    /// The next value if there is one, else std::nullopt (none yet, or closed and drained:
    /// see is_closed()); throws Lagged like receive(). Never suspends; any thread.
    std::optional<T> try_receive() {
        detail::State<T>& s = state_.get("eddy::broadcast::Receiver::try_receive");
        std::optional<T> item;
        std::uint64_t missed = 0;
        detail::Poll poll;
        {
            std::lock_guard guard(s.lock);
            poll = poll_locked(s, item, missed);
        }
        return outcome(poll, std::move(item), missed);
    }

    /// A new receiver of the same channel that sees the values sent from now on.
    Receiver resubscribe() const { return subscribe(state_.get("eddy::broadcast::Receiver::resubscribe")); }

    /// How far behind this receiver is: the values sent since its last receive that it has
    /// not received, as Tokio's len() counts. 0 for one that has caught up (or subscribed
    /// after the last send). Past the capacity it has lagged: the next receive throws Lagged
    /// with the values lost (len() minus the capacity), then gives the ring's oldest. Any
    /// thread, also while this receiver's task receives: it reads under the channel's lock,
    /// where every receive moves the receiver's position.
    std::size_t len() const {
        detail::State<T>& s = state_.get("eddy::broadcast::Receiver::len");
        std::lock_guard guard(s.lock);
        return static_cast<std::size_t>(s.tail - next_);
    }
    /// len() == 0: a receive now would wait (or give std::nullopt once closed).
    bool is_empty() const { return len() == 0; }

    /// True once every sender is gone (values may remain to be received).
    bool is_closed() const {
        detail::State<T>& s = state_.get("eddy::broadcast::Receiver::is_closed");
        std::lock_guard guard(s.lock);
        return s.senders == 0;
    }

private:
    friend class Sender<T>;
    template <class U>
    friend std::pair<Sender<U>, Receiver<U>> channel(std::size_t capacity);
    Receiver(detail::State<T>* s, std::uint64_t next) noexcept : state_(s), next_(next) {}

    /// A receiver at the tail of `s` (it sees what is sent from now on).
    static Receiver subscribe(detail::State<T>& s) {
        std::lock_guard guard(s.lock);
        ++s.receivers;
        return Receiver(&s, s.tail);
    }

    /// s.lock held: a lag (moving this receiver to the oldest value), a copy of the next
    /// value, the end of the stream, or nothing yet. A copy that throws changes nothing.
    detail::Poll poll_locked(detail::State<T>& s, std::optional<T>& item, std::uint64_t& missed) {
        const std::uint64_t oldest = s.oldest();
        if (next_ < oldest) {
            missed = oldest - next_;
            next_ = oldest;
            return detail::Poll::lagged;
        }
        if (next_ < s.tail) {
            item.emplace(*s.slots[next_ % s.capacity]);
            ++next_;
            return detail::Poll::value;
        }
        return s.senders == 0 ? detail::Poll::closed : detail::Poll::empty;
    }

    static std::optional<T> outcome(detail::Poll poll, std::optional<T>&& item, std::uint64_t missed) {
        if (poll == detail::Poll::lagged) throw Lagged(missed);
        return std::move(item);  // a value, or nullopt: empty or closed
    }

    eddy::detail::EndRef<detail::State<T>, eddy::detail::CountedReceiver> state_;
    // The position of the next value to receive: its task's, written only under the
    // channel's lock (poll_locked), so that len() may read it from any thread.
    std::uint64_t next_;
};

/// Copyable: each copy keeps the channel open; the last one's end (destroyed, or assigned
/// onto) closes it, and waiting receivers (drained) wake to std::nullopt.
template <class T>
class Sender {
public:
    /// Puts `value` in the ring (overwriting the oldest value when it is full) and wakes the
    /// waiting receivers. Never waits; any thread. Returns the number of receivers (0: the
    /// value was dropped).
    std::size_t send(T value) {
        detail::State<T>& s = state_.get("eddy::broadcast::Sender::send");
        eddy::detail::WakeList wakes;
        std::optional<T> evicted(std::move(value));  // becomes the overwritten value, if any
        std::size_t receivers;
        {
            std::lock_guard guard(s.lock);
            receivers = s.receivers;
            if (receivers == 0) return 0;
            s.slots[s.tail % s.capacity].swap(evicted);
            ++s.tail;
            // A receiver waits only at the tail: every waiter has a value now.
            s.waiters.grant_all(wakes);
        }
        wakes.wake_all();
        return receivers;  // `evicted` is destroyed here, outside the lock
    }

    /// A new receiver that sees the values sent from now on.
    Receiver<T> subscribe() const { return Receiver<T>::subscribe(state_.get("eddy::broadcast::Sender::subscribe")); }

    /// The receivers alive now (a snapshot).
    std::size_t receiver_count() const {
        detail::State<T>& s = state_.get("eddy::broadcast::Sender::receiver_count");
        std::lock_guard guard(s.lock);
        return s.receivers;
    }

private:
    template <class U>
    friend std::pair<Sender<U>, Receiver<U>> channel(std::size_t capacity);
    explicit Sender(detail::State<T>* s) noexcept : state_(s) {}

    /// The senders' count (EndRef's Policy): the last one closes the channel.
    struct Counted {
        static void join(detail::State<T>& s) noexcept { ++s.senders; }
        static void leave(detail::State<T>& s, eddy::detail::WakeList& wakes) noexcept {
            if (--s.senders == 0) s.waiters.grant_all(wakes);  // they wait drained: nullopt
        }
    };

    eddy::detail::EndRef<detail::State<T>, Counted> state_;
};

/// A connected pair: `auto [tx, rx] = eddy::broadcast::channel<T>(capacity);` Throws
/// std::invalid_argument if `capacity` is 0.
template <class T>
std::pair<Sender<T>, Receiver<T>> channel(std::size_t capacity) {
    if (capacity == 0) throw std::invalid_argument("eddy::broadcast::channel: the capacity must be at least 1");
    auto* s = new detail::State<T>(capacity);
    return {Sender<T>(s), Receiver<T>(s, 0)};
}

}  // namespace eddy::broadcast
