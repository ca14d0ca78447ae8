//! eddy/sync/channel.hpp: Channel<T>, a bounded multi-producer multi-consumer queue
//! between tasks (Tokio's mpsc::channel, with any number of receivers too).
//!
//!     eddy::Channel<int> ch(16);                   // capacity 16; share it by reference
//!     co_await ch.send(42);                        // suspends while the channel is full
//!     std::optional<int> v = co_await ch.receive(); // suspends while it is empty
//!     ch.close();                                   // no more sends; receivers drain, then nullopt
//!
//! Semantics:
//!   * FIFO: values come out in the order they went in; suspended senders and receivers are
//!     served in the order they started waiting. A send to a waiting receiver hands the value
//!     over directly; a receive that frees a slot moves the first waiting sender's value into
//!     the buffer and lets that sender go on.
//!   * close() (idempotent, any thread): later sends throw eddy::ChannelClosed, and so do the
//!     senders waiting at that moment (their values are not sent). Receivers first drain what
//!     is buffered, then get std::nullopt (end of stream); receivers waiting at the close get
//!     std::nullopt at once (they only wait while the buffer is empty).
//!   * A woken task is queued on a worker of the runtime it awaited from (the waker's own
//!     worker when that is the same runtime), never resumed inline. The channel may be
//!     shared by tasks of several runtimes, and either may shut down first: a value handed to
//!     a receiver whose frame its runtime's shutdown destroys before it resumed goes back to
//!     the front of the channel, in the order the values left it (to the next waiting
//!     receiver, or ahead of the buffer, which may then hold more than its capacity for a
//!     while). Nothing is lost unless memory runs out for that.
//!   * T must be movable; its moves should not throw (values move in and out of the buffer
//!     under the channel's lock).
//!   * One SpinLock per channel and a ring buffer allocated once: no allocation per message.
//!
//! Who may call what: `co_await ch.send(v)` and `co_await ch.receive()` only from a task on a
//! runtime worker (eddy::WrongThread otherwise); try_send, try_receive, close, is_closed, size
//! and capacity from any thread. Not copyable or movable: share it by reference or through a
//! shared_ptr. It must outlive every task that uses it. Channel(0) throws
//! std::invalid_argument.
//!
//! Cancellation (eddy/tasks/cancellation.hpp): a send or receive cancelled while waiting
//! resumes with eddy::OperationCancelled and has no effect: a cancelled send sends nothing, a
//! cancelled receive consumes nothing. If the operation completed before the cancel took
//! effect (the value was handed over), it returns normally instead. Awaiting with a stopped
//! token throws at once, even if the operation could complete.
//! @file
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include <eddy/tasks/detail/spin_lock.hpp>
#include <eddy/runtime/detail/wait_queue.hpp>
#include <eddy/sync/detail/returned_values.hpp>
#include <eddy/tasks/errors.hpp>

namespace eddy {

template <class T>
/// A bounded multi-producer multi-consumer FIFO queue of T between tasks: senders wait
/// while it is full, receivers while it is empty (see the file comment).
class Channel {
    static_assert(std::is_move_constructible_v<T>, "eddy::Channel<T>: T must be move-constructible");

public:
    /// A channel that buffers up to `capacity` values; std::invalid_argument if it is 0.
    explicit Channel(std::size_t capacity) : capacity_(checked(capacity)), slots_(new Slot[capacity_]) {}
    Channel(const Channel&) = delete;
    Channel& operator=(const Channel&) = delete;
    ~Channel() {
        while (count_ != 0) pop_locked();
    }

    /// What send() returns; `co_await` it (it delivers nothing otherwise).
    class [[nodiscard]] SendAwaiter : public detail::WaitAwaiter<SendAwaiter> {
    public:
        static constexpr const char* kWhat = "co_await on eddy::Channel::send()";
        static constexpr const char* kCancelled = "eddy::Channel::send: the wait was cancelled";

        /// Made by send(); holds `value` until a receiver or a slot takes it.
        SendAwaiter(Channel& ch, T value) noexcept(std::is_nothrow_move_constructible_v<T>)
            : detail::WaitAwaiter<SendAwaiter>(ch.senders_), ch_(ch), value_(std::move(value)) {}
        /// Movable until first awaited (WaitAwaiter asserts it): the value goes along.
        SendAwaiter(SendAwaiter&& o) noexcept(std::is_nothrow_move_constructible_v<T>)
            : detail::WaitAwaiter<SendAwaiter>(std::move(o)), ch_(o.ch_), value_(std::move(o.value_)) {}
        SendAwaiter(const SendAwaiter&) = delete;
        SendAwaiter& operator=(const SendAwaiter&) = delete;
        ~SendAwaiter() { this->leave(); }  // before value_ goes: a receiver may take it

        /// Lock held.
        bool try_now(detail::WakeList& wakes) {
            if (ch_.closed_) {
                closed_ = true;
                return true;
            }
            return ch_.put_locked(value_, wakes);
        }
        void await_resume() {
            this->finish_wait();
            if (closed_) throw ChannelClosed("eddy::Channel::send: the channel is closed");
        }

    private:
        friend class Channel;
        Channel& ch_;
        T value_;              // moved out by whoever takes it (under the lock)
        bool closed_ = false;  // set under the lock, before the grant
    };

    /// What receive() returns; `co_await` it.
    class [[nodiscard]] ReceiveAwaiter : public detail::WaitAwaiter<ReceiveAwaiter> {
    public:
        static constexpr const char* kWhat = "co_await on eddy::Channel::receive()";
        static constexpr const char* kCancelled = "eddy::Channel::receive: the wait was cancelled";

        /// Made by receive().
        explicit ReceiveAwaiter(Channel& ch) noexcept : detail::WaitAwaiter<ReceiveAwaiter>(ch.receivers_), ch_(ch) {}
        /// Movable until first awaited (WaitAwaiter asserts it): nothing was received yet.
        ReceiveAwaiter(ReceiveAwaiter&& o) noexcept : detail::WaitAwaiter<ReceiveAwaiter>(std::move(o)), ch_(o.ch_) {}
        ReceiveAwaiter(const ReceiveAwaiter&) = delete;
        ReceiveAwaiter& operator=(const ReceiveAwaiter&) = delete;
        /// First (before item_ goes: a sender may fill it); a value handed over but never
        /// taken goes back to the channel.
        ~ReceiveAwaiter() {
            if (this->leave() && item_)
                ch_.returned_.template give_back<ReceiveAwaiter>(ch_.lock_, ch_.receivers_, *item_, seq_);
        }

        /// Lock held: an item, or the end of the stream, is a result.
        bool try_now(detail::WakeList& wakes) {
            if (ch_.available_locked()) {
                item_.emplace(ch_.take_locked(seq_, wakes));
                return true;
            }
            return ch_.closed_;  // closed and drained: nullopt
        }
        std::optional<T> await_resume() {
            this->finish_wait();
            return std::move(item_);
        }

    private:
        friend class Channel;
        friend class detail::ReturnedValues<T>;
        Channel& ch_;
        std::optional<T> item_;  // filled under the lock, before the grant
        std::uint64_t seq_ = 0;  // item_'s number among the values that left (returned_values.hpp)
    };

    /// `co_await ch.send(v)`: buffers `v` (or hands it to a waiting receiver), suspending
    /// while the channel is full. Throws eddy::ChannelClosed if the channel is closed.
    SendAwaiter send(T value) noexcept(std::is_nothrow_move_constructible_v<T>) {
        return SendAwaiter(*this, std::move(value));
    }

    /// `co_await ch.receive()`: the next value, or std::nullopt once the channel is closed and
    /// drained.
    ReceiveAwaiter receive() noexcept { return ReceiveAwaiter(*this); }

    /// Sends without suspending: false (and `value` untouched) when full; throws
    /// eddy::ChannelClosed (`value` untouched) when closed. Any thread.
    bool try_send(T&& value) {
        detail::WakeList wakes;
        bool sent;
        {
            std::lock_guard guard(lock_);
            if (closed_) throw ChannelClosed("eddy::Channel::try_send: the channel is closed");
            sent = put_locked(value, wakes);
        }
        wakes.wake_all();
        return sent;
    }

    /// The next value if one is buffered, else std::nullopt (empty or closed: see
    /// is_closed()). Never suspends; any thread.
    std::optional<T> try_receive() {
        detail::WakeList wakes;
        std::optional<T> item;
        {
            std::lock_guard guard(lock_);
            if (!available_locked()) return std::nullopt;
            std::uint64_t seq;
            item.emplace(take_locked(seq, wakes));
        }
        wakes.wake_all();
        return item;
    }

    /// Closes the channel (idempotent; any thread): wakes waiting senders with
    /// ChannelClosed and waiting receivers with std::nullopt.
    void close() noexcept {
        detail::WakeList wakes;
        {
            std::lock_guard guard(lock_);
            if (closed_) return;
            closed_ = true;
            while (auto* s = static_cast<SendAwaiter*>(senders_.front())) {
                s->closed_ = true;
                senders_.grant_front(wakes);
            }
            receivers_.grant_all(wakes);  // they wait only on an empty buffer: nullopt
        }
        wakes.wake_all();
    }

    /// True once close() was called (values may still be buffered).
    bool is_closed() const noexcept {
        std::lock_guard guard(lock_);
        return closed_;
    }
    /// The buffered values (a snapshot), counting those given back (see the file comment).
    std::size_t size() const noexcept {
        std::lock_guard guard(lock_);
        return count_ + returned_.size();
    }
    /// The capacity it was made with.
    std::size_t capacity() const noexcept { return capacity_; }

private:
    struct Slot {
        alignas(T) unsigned char bytes[sizeof(T)];
        T* get() noexcept { return std::launder(reinterpret_cast<T*>(bytes)); }
    };

    static std::size_t checked(std::size_t capacity) {
        if (capacity == 0) throw std::invalid_argument("eddy::Channel: the capacity must be at least 1");
        return capacity;
    }

    /// lock_ held, not closed: hands `value` to the first waiting receiver or buffers it.
    /// False (value untouched) when full.
    bool put_locked(T& value, detail::WakeList& wakes) {
        if (auto* r = static_cast<ReceiveAwaiter*>(receivers_.front())) {
            // Receivers wait only on an empty buffer, so handing over keeps the FIFO order.
            r->item_.emplace(std::move(value));
            r->seq_ = next_seq_++;
            receivers_.grant_front(wakes);
            return true;
        }
        if (count_ == capacity_) return false;
        std::size_t tail = head_ + count_;
        if (tail >= capacity_) tail -= capacity_;
        ::new (static_cast<void*>(slots_[tail].bytes)) T(std::move(value));
        ++count_;
        return true;
    }

    /// lock_ held: a value to take (buffered, or given back).
    bool available_locked() const noexcept { return count_ != 0 || !returned_.empty(); }

    /// lock_ held, available_locked(): the oldest value and its number (`seq`); a slot freed
    /// in the buffer takes the first waiting sender's value.
    T take_locked(std::uint64_t& seq, detail::WakeList& wakes) {
        if (!returned_.empty()) return returned_.pop_front(seq);
        seq = next_seq_++;
        T v = pop_locked();
        refill_locked(wakes);
        return v;
    }

    /// lock_ held, count_ > 0: moves the oldest buffered value out.
    T pop_locked() {
        T* p = slots_[head_].get();
        T v = std::move(*p);
        p->~T();
        if (++head_ == capacity_) head_ = 0;
        --count_;
        return v;
    }

    /// lock_ held, after a pop: the first waiting sender's value fills the freed slot.
    void refill_locked(detail::WakeList& wakes) {
        if (auto* s = static_cast<SendAwaiter*>(senders_.front())) {
            std::size_t tail = head_ + count_;
            if (tail >= capacity_) tail -= capacity_;
            ::new (static_cast<void*>(slots_[tail].bytes)) T(std::move(s->value_));
            ++count_;
            senders_.grant_front(wakes);
        }
    }

    mutable detail::SpinLock lock_;
    const std::size_t capacity_;
    std::unique_ptr<Slot[]> slots_;
    std::size_t head_ = 0;                // guarded by lock_
    std::size_t count_ = 0;               // guarded by lock_
    bool closed_ = false;                 // guarded by lock_
    std::uint64_t next_seq_ = 0;          // guarded by lock_: the next value's number as it leaves
    detail::ReturnedValues<T> returned_;  // guarded by lock_: ahead of the buffer
    detail::WaitQueue senders_{lock_};
    detail::WaitQueue receivers_{lock_};
};

}  // namespace eddy
