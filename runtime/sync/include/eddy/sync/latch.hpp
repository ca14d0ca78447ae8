//! eddy/sync/latch.hpp: Latch, a single-use countdown that tasks await until it reaches
//! zero (std::latch, asynchronous).
//!
//!     eddy::Latch ready(3);
//!     ... ready.count_down();               // from any thread, three times in all
//!     ... co_await ready.wait();            // suspends until the count is zero
//!     ... co_await ready.arrive_and_wait(); // count_down(1), then wait
//!     if (ready.try_wait()) { ... }         // never suspends
//!
//! Reaching zero wakes every waiter: each is queued on a worker of the runtime it awaited
//! from (the caller's own worker when that is the same runtime), in the order they started
//! waiting; none is resumed inline inside count_down. The count never goes back up.
//!
//! Who may call what: count_down and try_wait from any thread; `co_await latch.wait()` and
//! `co_await latch.arrive_and_wait(n)` only from a task on a runtime worker
//! (eddy::WrongThread otherwise; arrive_and_wait counts down before it checks). Counting
//! down by more than remains throws std::invalid_argument and changes nothing. The Latch must
//! outlive its waiters.
//!
//! Cancellation (eddy/tasks/cancellation.hpp): a task cancelled while waiting resumes with
//! eddy::OperationCancelled, unless the count reached zero first (then it resumes normally);
//! awaiting with a stopped token throws at once, even at zero. arrive_and_wait's arrival is
//! never undone by a cancellation.
//! @file
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <stdexcept>

#include <eddy/tasks/detail/spin_lock.hpp>
#include <eddy/runtime/detail/wait_queue.hpp>

namespace eddy {

/// A single-use countdown that tasks await until it reaches zero (see the file comment).
class Latch {
public:
    /// Starts at `count` (0: already open).
    explicit Latch(std::size_t count) noexcept : count_(count) {}
    Latch(const Latch&) = delete;
    Latch& operator=(const Latch&) = delete;

    /// Subtracts `n`; at zero, wakes every waiter. Throws std::invalid_argument if `n` is more
    /// than the remaining count. Any thread.
    void count_down(std::size_t n = 1) {
        detail::WakeList wakes;
        {
            std::lock_guard guard(lock_);
            const std::size_t left = count_.load(std::memory_order_relaxed);  // the lock orders stores
            if (n > left) throw std::invalid_argument("eddy::Latch::count_down: n is more than the remaining count");
            // Release: pairs with try_wait()'s acquire, so what the counters did is visible.
            count_.store(left - n, std::memory_order_release);
            if (left - n == 0) waiters_.grant_all(wakes);
        }
        wakes.wake_all();
    }

    /// True once the count is zero. Any thread.
    bool try_wait() const noexcept {
        return count_.load(std::memory_order_acquire) == 0;  // acquire: pairs with count_down
    }

    /// What wait() and arrive_and_wait() return; `co_await` it.
    class [[nodiscard]] Awaiter : public detail::WaitAwaiter<Awaiter> {
    public:
        static constexpr const char* kWhat = "co_await on eddy::Latch::wait()";
        static constexpr const char* kCancelled = "eddy::Latch::wait: the wait was cancelled";

        /// Made by wait() and arrive_and_wait().
        explicit Awaiter(Latch& l) noexcept : WaitAwaiter(l.waiters_), latch_(l) {}
        /// Lock held.
        bool try_now(detail::WakeList&) const noexcept { return latch_.count_.load(std::memory_order_relaxed) == 0; }
        void await_resume() { finish_wait(); }

    private:
        Latch& latch_;
    };

    /// `co_await latch.wait()`: returns once the count is zero.
    Awaiter wait() noexcept { return Awaiter(*this); }

    /// `co_await latch.arrive_and_wait(n)`: count_down(n) at once, then wait().
    Awaiter arrive_and_wait(std::size_t n = 1) {
        count_down(n);
        return Awaiter(*this);
    }

private:
    detail::SpinLock lock_;
    std::atomic<std::size_t> count_;  // written under lock_; read without it by try_wait()
    detail::WaitQueue waiters_{lock_};
};

}  // namespace eddy
