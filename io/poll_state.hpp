// io/poll_state.hpp: what a socket shares with the reactor once it has had to wait: its
// readiness words, its queued waiters and its multishot poll. See eddy/io/detail/
// socket_io.hpp for the protocol as the awaiter sees it.
//
// # Who touches what
//   word[dir]     atomic; the reactor bumps it under `lock`, awaiters clear its ready bit
//                 under `lock` or with a CAS (a short read).
//   waiters, arm, closed, reactor
//                 under `lock`: the awaiters (queue, cancel), the reactor (events), close().
//   refs          atomic count of the holders (the socket, each queued or woken awaiter, the
//                 poll while it is armed or about to be, each node on its way to the
//                 reactor). The last one closes the descriptor and frees the state.
//   in_kernel, prev_armed, next_armed
//                 reactor thread only: the poll is in the ring; the reactor's list of armed
//                 states (to cancel them all at shutdown).
//
// # The poll's life
//   idle --(a waiter queues itself; it posts arm_node)--> arming --(the reactor submits a
//   multishot POLL_ADD)--> armed --(a completion without IORING_CQE_F_MORE: cancelled by
//   close(), an error, or a kernel that ends multishot polls)--> idle, every waiter woken
//   (the next one to wait arms it again). close() posts cancel_node while it is not idle.
#pragma once

#include "runtime/private.hpp"

#include <atomic>
#include <cstdint>
#include <vector>

#include <eddy/io/detail/operation.hpp>
#include <eddy/io/detail/socket_io.hpp>
#include <eddy/runtime/detail/spin_lock.hpp>

namespace eddy::detail {

class Scheduler;

/// A reactor request about a PollState (kPollArm, kPollCancel).
struct PollNode : ReactorNode {
    PollNode(Kind k, PollState* s) noexcept : ReactorNode(k), state(s) {}
    PollState* const state;
};

class PollState {
public:
    enum Dir : int { kRead = 0, kWrite = 1 };
    static constexpr std::uint32_t kReady = 1;    // word: the direction may be ready
    static constexpr std::uint32_t kFinal = 2;    // word: end of stream or error seen (sticky)
    static constexpr std::uint32_t kTickOne = 4;  // word: one event later
    enum class Arm : std::uint8_t { kIdle, kArming, kArmed };

    /// A new state for `fd`, held by the socket (one reference). Nothing is known about
    /// either direction yet, so both start ready: the next operation simply tries.
    PollState(int fd, Reactor& reactor, Scheduler& sched) noexcept;
    PollState(const PollState&) = delete;
    PollState& operator=(const PollState&) = delete;

    /// Frees a state that was never shared (it lost the race to be installed), leaving the
    /// descriptor open.
    static void discard(PollState* s) noexcept {
        s->fd_ = -1;
        delete s;
    }

    void add_ref() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }  // a holder exists already
    /// Drops a reference; the last one closes the descriptor and frees the state.
    void release() noexcept;

    // --- awaiters (any worker) ------------------------------------------------------------
    std::uint32_t word(Dir d) const noexcept { return word_[d].load(std::memory_order_acquire); }
    /// After a short read: clears `ready` unless an event came since `seen` was read, or
    /// the stream has ended (then every read returns at once, and no event comes again).
    void clear_ready(Dir d, std::uint32_t seen) noexcept {
        if ((seen & kFinal) != 0) return;
        // Relaxed on failure, acq_rel on success: the word is the only data involved.
        word_[d].compare_exchange_strong(seen, seen & ~kReady, std::memory_order_acq_rel, std::memory_order_relaxed);
    }
    /// Queues `w` unless an event came since `seen`, the socket was closed or `w` was
    /// cancelled (then false: w->result_ says how it settled, or it should try again).
    enum class Queue : std::uint8_t { kQueued, kRetry, kSettled };
    Queue queue(SocketAwaiter* w, Dir d, std::uint32_t seen) noexcept;
    /// The awaiter's destructor: leaves the queue if still on it (a frame destroyed while it
    /// waited: runtime shutdown).
    void leave(SocketAwaiter* w) noexcept;
    /// A stop callback: takes `w` off the queue and resumes its task with ECANCELED, or, if
    /// it is not queued (trying on a worker right now), marks it so that it does not queue.
    void cancel(SocketAwaiter* w) noexcept;

    // --- the socket ------------------------------------------------------------------------
    /// close() and destruction: marks the state closed, wakes every waiter, cancels the poll
    /// and drops the socket's reference.
    void close() noexcept;

    // --- the reactor thread ------------------------------------------------------------------
    /// The arm request arrived: false when the poll must not be submitted (closed meanwhile).
    bool begin_arm() noexcept;
    /// A completion of the poll (`res`: revents or -errno; `more`: IORING_CQE_F_MORE): wakes
    /// the waiters of every direction it concerns (their retries go to `ready`); without
    /// `more`, the poll is over and every waiter is woken.
    void on_event(std::int32_t res, bool more, std::vector<void*>& ready) noexcept;
    /// Shutdown: the poll will never be armed or reported again.
    void disarm_for_shutdown() noexcept;

    int fd() const noexcept { return fd_; }
    Reactor& reactor() const noexcept { return *reactor_; }
    /// close() has run: a retry gives the closed result without touching the socket.
    /// Acquire: pairs with close()'s release store.
    bool closed() const noexcept { return closed_flag_.load(std::memory_order_acquire); }
    /// The direction an operation waits for.
    static Dir dir_of(SocketAwaiter::Op op) noexcept {
        return op == SocketAwaiter::Op::kSend || op == SocketAwaiter::Op::kSendAll || op == SocketAwaiter::Op::kSendMsg
                   ? kWrite
                   : kRead;
    }
    /// What an operation gives once its socket was closed by close() (see SocketIo::close).
    static std::int64_t closed_result(SocketAwaiter::Op op) noexcept;

    // Reactor thread only.
    bool in_kernel = false;
    PollState* prev_armed = nullptr;
    PollState* next_armed = nullptr;
    PollNode arm_node{ReactorNode::Kind::kPollArm, this};
    PollNode cancel_node{ReactorNode::Kind::kPollCancel, this};

private:
    ~PollState();
    void take(Dir d, SocketAwaiter*& chain) noexcept;  // under lock_: unlinks every waiter of d
    void link(SocketAwaiter* w, Dir d) noexcept;
    void unlink(SocketAwaiter* w, Dir d) noexcept;

    int fd_;  // -1 only in discard()
    Reactor* reactor_;
    Scheduler* sched_;
    // Acquire loads by awaiters; stores and RMWs under lock_ or by CAS (see above).
    std::atomic<std::uint32_t> word_[2] = {kReady, kReady};
    // Acq_rel decrement in release(): the last holder sees every other holder's writes.
    std::atomic<std::uint32_t> refs_{1};
    SpinLock lock_;
    SocketAwaiter* head_[2] = {nullptr, nullptr};  // guarded by lock_
    SocketAwaiter* tail_[2] = {nullptr, nullptr};  // guarded by lock_
    Arm arm_ = Arm::kIdle;                         // guarded by lock_
    bool closed_ = false;                          // guarded by lock_
    std::atomic<bool> closed_flag_{false};         // the same, for retries that do not lock
};

} // namespace eddy::detail
