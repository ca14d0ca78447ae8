//! eddy/sync/unbounded_channel.hpp: UnboundedChannel<T>, a multi-producer multi-consumer
//! queue without a capacity: a send never waits (Tokio's mpsc::unbounded_channel, with any
//! number of receivers too).
//!
//!     eddy::UnboundedChannel<int> ch;               // share it by reference
//!     ch.send(42);                                  // any thread, never suspends
//!     std::optional<int> v = co_await ch.receive(); // suspends while it is empty
//!     ch.close();                                   // no more sends; receivers drain, then nullopt
//!
//! The shape is Channel<T>'s (one object shared by reference, close() on it, any number of
//! receivers), not Tokio's sender/receiver halves: code moves between the two channels by
//! changing the type and `co_await ch.send(v)` into `ch.send(v)`.
//!
//! Semantics:
//!   * FIFO: values come out in the order their sends took the channel's lock (one thread's
//!     sends in its order); suspended receivers are served in the order they started waiting.
//!     A send to a waiting receiver hands the value over directly.
//!   * send(v) is a plain function, not an awaiter: it never suspends, from a task or from any
//!     other thread (a thread pool's callback, a library's own thread, ...). Nothing bounds
//!     the backlog: a producer faster than its consumers grows the queue without limit (use
//!     Channel<T> for backpressure).
//!   * close() (idempotent, any thread): later sends throw eddy::ChannelClosed and leave their
//!     value with the caller. Receivers first drain what is buffered, then get std::nullopt
//!     (end of stream); receivers waiting at the close get std::nullopt at once (they only
//!     wait while the queue is empty).
//!   * Storage: one ring buffer, allocated at the first value buffered (8 slots) and doubled
//!     when full; it never shrinks (memory stays at the largest backlog until the channel is
//!     destroyed). No allocation per message: the growth is amortized, and it allocates
//!     outside the channel's lock. A value handed to a waiting receiver is not buffered.
//!   * A woken task is queued on a worker of the runtime it awaited from (the sender's own
//!     worker when that is the same runtime), never resumed inline inside send. Tasks of
//!     several runtimes may share the channel, and either runtime may shut down first: a
//!     value handed to a receiver whose frame its runtime's shutdown destroys before it
//!     resumed goes back to the front of the channel, in the order the values left it (to
//!     the next waiting receiver, or ahead of the buffer). Nothing is lost unless memory runs
//!     out for that.
//!   * T must be nothrow-move-constructible (values move in and out of the buffer, and to the
//!     grown buffer, under the channel's lock).
//!
//! Who may call what: `co_await ch.receive()` only from a task on a runtime worker
//! (eddy::WrongThread otherwise); send, try_receive, close, is_closed and size from any
//! thread. Not copyable or movable: share it by reference or through a shared_ptr. It must
//! outlive every task that uses it.
//!
//! Cancellation (eddy/tasks/cancellation.hpp): a receive cancelled while waiting resumes with
//! eddy::OperationCancelled and consumes nothing: the value a later send brings goes to the
//! next receiver (or the buffer). If the value was handed over before the cancel took effect,
//! the receive returns it instead. Awaiting with a stopped token throws at once, even if a
//! value is buffered.
//! @file
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include <eddy/tasks/detail/spin_lock.hpp>
#include <eddy/runtime/detail/wait_queue.hpp>
#include <eddy/sync/detail/returned_values.hpp>
#include <eddy/tasks/errors.hpp>

namespace eddy {

template <class T>
/// A multi-producer multi-consumer FIFO queue without a capacity: send() never waits,
/// receivers wait while it is empty (see the file comment).
class UnboundedChannel {
    static_assert(std::is_nothrow_move_constructible_v<T>,
                  "eddy::UnboundedChannel<T>: T must be nothrow-move-constructible");

public:
    UnboundedChannel() noexcept = default;
    UnboundedChannel(const UnboundedChannel&) = delete;
    UnboundedChannel& operator=(const UnboundedChannel&) = delete;
    ~UnboundedChannel() {
        while (count_ != 0) pop_locked();
    }

    /// What receive() returns; `co_await` it.
    class [[nodiscard]] ReceiveAwaiter : public detail::WaitAwaiter<ReceiveAwaiter> {
    public:
        static constexpr const char* kWhat = "co_await on eddy::UnboundedChannel::receive()";
        static constexpr const char* kCancelled = "eddy::UnboundedChannel::receive: the wait was cancelled";

        /// Made by receive().
        explicit ReceiveAwaiter(UnboundedChannel& ch) noexcept
            : detail::WaitAwaiter<ReceiveAwaiter>(ch.receivers_), ch_(ch) {}
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
        bool try_now(detail::WakeList&) noexcept {
            if (ch_.available_locked()) {
                item_.emplace(ch_.take_locked(seq_));
                return true;
            }
            return ch_.closed_;  // closed and drained: nullopt
        }
        std::optional<T> await_resume() {
            this->finish_wait();
            return std::move(item_);
        }

    private:
        friend class UnboundedChannel;
        friend class detail::ReturnedValues<T>;
        UnboundedChannel& ch_;
        std::optional<T> item_;  // filled under the lock, before the grant
        std::uint64_t seq_ = 0;  // item_'s number among the values that left (returned_values.hpp)
    };

    /// Queues `value` (or hands it to a waiting receiver). Never suspends; any thread. Throws
    /// eddy::ChannelClosed when the channel is closed, std::bad_alloc when the buffer cannot
    /// grow; either way `value` is left with the caller.
    void send(T&& value) { push(value); }
    /// send(T&&), copying `value`.
    void send(const T& value) requires std::is_copy_constructible_v<T> {
        T copy(value);
        push(copy);
    }

    /// `co_await ch.receive()`: the next value, or std::nullopt once the channel is closed and
    /// drained.
    ReceiveAwaiter receive() noexcept { return ReceiveAwaiter(*this); }

    /// The next value if one is buffered, else std::nullopt (empty or closed: see
    /// is_closed()). Never suspends; any thread.
    std::optional<T> try_receive() noexcept {
        std::lock_guard guard(lock_);
        if (!available_locked()) return std::nullopt;
        std::uint64_t seq;
        return take_locked(seq);
    }

    /// Closes the channel (idempotent; any thread): waiting receivers get std::nullopt.
    void close() noexcept {
        detail::WakeList wakes;
        {
            std::lock_guard guard(lock_);
            if (closed_) return;
            closed_ = true;
            receivers_.grant_all(wakes);  // they wait only on an empty queue: nullopt
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

private:
    struct Slot {
        alignas(T) unsigned char bytes[sizeof(T)];
        T* get() noexcept { return std::launder(reinterpret_cast<T*>(bytes)); }
    };
    static constexpr std::size_t kFirstCapacity = 8;

    /// Hands `value` to the first waiting receiver or buffers it, growing the buffer as
    /// needed; `value` is moved from only when it was taken.
    void push(T& value) {
        detail::WakeList wakes;
        std::unique_ptr<Slot[]> spare;  // a larger buffer, then the one it replaced
        std::size_t spare_capacity = 0;
        for (;;) {
            std::size_t want;  // 0: done; else the full buffer's size times two
            {
                std::lock_guard guard(lock_);
                want = push_locked(value, wakes, spare, spare_capacity);
            }
            if (want == 0) break;
            // Full: allocate without the lock, then try again (the buffer may have grown or
            // drained meanwhile; a spare still too small is replaced).
            spare.reset(new Slot[want]);
            spare_capacity = want;
        }
        wakes.wake_all();
        // `spare` (the replaced buffer, or an unused one) is freed here, outside the lock.
    }

    /// lock_ held: push()'s attempt. Returns 0 when `value` was taken, else the size of the
    /// buffer it needs.
    std::size_t push_locked(T& value, detail::WakeList& wakes, std::unique_ptr<Slot[]>& spare,
                            std::size_t& spare_capacity) {
        if (closed_) throw ChannelClosed("eddy::UnboundedChannel::send: the channel is closed");
        if (auto* r = static_cast<ReceiveAwaiter*>(receivers_.front())) {
            // Receivers wait only on an empty queue, so handing over keeps the order.
            r->item_.emplace(std::move(value));
            r->seq_ = next_seq_++;
            receivers_.grant_front(wakes);
            return 0;
        }
        if (count_ == capacity_) {
            if (spare_capacity <= capacity_) return capacity_ == 0 ? kFirstCapacity : capacity_ * 2;
            grow_locked(spare, spare_capacity);
        }
        std::size_t tail = head_ + count_;
        if (tail >= capacity_) tail -= capacity_;
        ::new (static_cast<void*>(slots_[tail].bytes)) T(std::move(value));
        ++count_;
        return 0;
    }

    /// lock_ held, spare_capacity > count_: moves the values to the front of `spare`, which
    /// becomes the buffer; `spare` gets the old one.
    void grow_locked(std::unique_ptr<Slot[]>& spare, std::size_t& spare_capacity) noexcept {
        for (std::size_t i = 0; i < count_; ++i) {
            T* p = slots_[head_].get();
            ::new (static_cast<void*>(spare[i].bytes)) T(std::move(*p));
            p->~T();
            if (++head_ == capacity_) head_ = 0;
        }
        head_ = 0;
        slots_.swap(spare);
        std::swap(capacity_, spare_capacity);
    }

    /// lock_ held: a value to take (buffered, or given back).
    bool available_locked() const noexcept { return count_ != 0 || !returned_.empty(); }

    /// lock_ held, available_locked(): the oldest value and its number (`seq`).
    T take_locked(std::uint64_t& seq) noexcept {
        if (!returned_.empty()) return returned_.pop_front(seq);
        seq = next_seq_++;
        return pop_locked();
    }

    /// lock_ held, count_ > 0: moves the oldest buffered value out.
    T pop_locked() noexcept {
        T* p = slots_[head_].get();
        T v = std::move(*p);
        p->~T();
        if (++head_ == capacity_) head_ = 0;
        --count_;
        return v;
    }

    mutable detail::SpinLock lock_;
    std::unique_ptr<Slot[]> slots_;       // guarded by lock_
    std::size_t capacity_ = 0;            // guarded by lock_
    std::size_t head_ = 0;                // guarded by lock_
    std::size_t count_ = 0;               // guarded by lock_
    bool closed_ = false;                 // guarded by lock_
    std::uint64_t next_seq_ = 0;          // guarded by lock_: the next value's number as it leaves
    detail::ReturnedValues<T> returned_;  // guarded by lock_: ahead of the buffer
    detail::WaitQueue receivers_{lock_};
};

}  // namespace eddy
