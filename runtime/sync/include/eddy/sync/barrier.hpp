//! eddy/sync/barrier.hpp: Barrier, a reusable rendezvous of a fixed number of tasks
//! (std::barrier without a completion function, asynchronous; Tokio's sync::Barrier).
//!
//!     eddy::Barrier b(4);
//!     ... in each of 4 tasks, as often as they like:
//!     eddy::BarrierResult r = co_await b.arrive_and_wait();  // suspends until 4 have arrived
//!     if (r.is_leader()) { ... }                              // exactly one of the 4
//!
//! Generations: the tasks that arrive form the current generation. The n-th arrival completes
//! it: it returns at once, and every other task of the generation is woken; the barrier is then
//! empty and the next arrivals form the next generation (generation() counts the completed
//! ones). The task whose arrival completed the generation is its leader: is_leader() is true for
//! it, and for it alone. Woken tasks are queued on a worker of the runtime they awaited from
//! (the leader's own worker when that is the same runtime), in the order they arrived; none is
//! resumed inline.
//!
//! Who may call what: `co_await b.arrive_and_wait()` only from a task on a runtime worker
//! (eddy::WrongThread otherwise; nothing arrives); parties, generation and waiting from any
//! thread. Barrier(0) throws std::invalid_argument. The Barrier must outlive its waiters.
//!
//! Cancellation (eddy/tasks/cancellation.hpp): a task cancelled while it waits withdraws its
//! arrival and resumes with eddy::OperationCancelled: the generation still needs n arrivals
//! (so no generation completes with fewer than n tasks there to see it). If the generation
//! completed before the cancel took effect, the task resumes normally with its result. Awaiting
//! with a stopped token throws at once and does not arrive. A frame destroyed while it waits
//! (runtime shutdown) withdraws its arrival too.
//! @file
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <utility>

#include <eddy/tasks/detail/spin_lock.hpp>
#include <eddy/runtime/detail/wait_queue.hpp>

namespace eddy {

/// What `co_await barrier.arrive_and_wait()` gives.
class BarrierResult {
public:
    /// True for exactly one task per generation: the one whose arrival completed it.
    bool is_leader() const noexcept { return leader_; }

private:
    friend class Barrier;
    explicit BarrierResult(bool leader) noexcept : leader_(leader) {}
    bool leader_;
};

/// A reusable rendezvous of a fixed number of tasks: each generation completes when that
/// many have arrived (see the file comment).
class Barrier {
public:
    /// `parties` tasks complete a generation. Throws std::invalid_argument when it is 0.
    explicit Barrier(std::size_t parties) : parties_(checked(parties)) {}
    Barrier(const Barrier&) = delete;
    Barrier& operator=(const Barrier&) = delete;

    /// What arrive_and_wait() returns; `co_await` it for the BarrierResult.
    class [[nodiscard]] Awaiter : public detail::WaitAwaiter<Awaiter> {
    public:
        static constexpr const char* kWhat = "co_await on eddy::Barrier::arrive_and_wait()";
        static constexpr const char* kCancelled = "eddy::Barrier::arrive_and_wait: the wait was cancelled";

        /// Made by arrive_and_wait().
        explicit Awaiter(Barrier& b) noexcept : WaitAwaiter(b.waiters_), barrier_(b) {}
        /// Movable until first awaited (WaitAwaiter asserts it): `o` has not arrived.
        Awaiter(Awaiter&& o) noexcept : WaitAwaiter(std::move(o)), barrier_(o.barrier_) {}
        /// Lock held: arrives. The waiters are this generation's other arrivals, so this one
        /// completes it when they are parties - 1.
        bool try_now(detail::WakeList& wakes) noexcept {
            if (barrier_.waiters_.size() + 1 < barrier_.parties_) return false;  // queued: arrived
            leader_ = true;
            barrier_.waiters_.grant_all(wakes);
            ++barrier_.generation_;
            return true;
        }
        BarrierResult await_resume() {
            finish_wait();
            return BarrierResult(leader_);
        }

    private:
        Barrier& barrier_;
        bool leader_ = false;  // set under the lock, before the grant
    };

    /// `co_await b.arrive_and_wait()`: arrives, and returns once the generation is complete.
    Awaiter arrive_and_wait() noexcept { return Awaiter(*this); }

    /// The tasks per generation.
    std::size_t parties() const noexcept { return parties_; }
    /// The generations completed so far (a snapshot).
    std::uint64_t generation() const noexcept {
        std::lock_guard guard(lock_);
        return generation_;
    }
    /// The tasks that arrived in the current generation and wait (a snapshot).
    std::size_t waiting() const noexcept {
        std::lock_guard guard(lock_);
        return waiters_.size();
    }

private:
    static std::size_t checked(std::size_t parties) {
        if (parties == 0) throw std::invalid_argument("eddy::Barrier: the number of parties must be at least 1");
        return parties;
    }

    mutable detail::SpinLock lock_;
    const std::size_t parties_;
    std::uint64_t generation_ = 0;  // guarded by lock_
    // The current generation's arrivals, waiting: a cancel or a destroyed frame leaves the
    // queue, which withdraws its arrival.
    detail::WaitQueue waiters_{lock_};
};

}  // namespace eddy
