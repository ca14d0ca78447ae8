// io/reactor/poll_state.hpp: what a socket shares with the reactor once it has had to wait: its
// readiness words, its queued waiters and its multishot poll. The waiters are PollWaiters
// (eddy/io/detail/poll_waiter.hpp): the state never knows what they wait to do. See
// eddy/net/detail/socket_io.hpp for the protocol as a socket operation sees it.
//
// # Who touches what
//   word[dir]     atomic; the reactor bumps it under `lock`, awaiters clear its ready bit
//                 under `lock` or with a CAS (a short read).
//   waiters, arm, closed, reactor
//                 under `lock`: the awaiters (queue, cancel), the reactor (events), close().
//                 `reactor` is the runtime the state is bound to (where its poll is armed).
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
//
// # Runtimes
// A state is bound to the runtime whose reactor arms its poll: the first one where the
// socket had to wait. A socket may then be used from tasks of any runtime; each waiter
// records its own (PollWaiter::home_), and every wake-up goes there:
//   - Waiters of the bound runtime are handed to its reactor's bulk push (on_event) or
//     queued after the lock (close(), on that runtime's worker), as before.
//   - Waiters of another runtime are queued on theirs while the lock is held (on_event,
//     close(), disarm_for_shutdown): a frame destroyed by its runtime's shutdown leaves
//     the queue under that lock (leave()), so its runtime is alive during the push, and
//     the waiter itself too while we read its links. A cancel queues the waiter after the
//     lock, as before: the awaiter's destructor waits for a cancel callback in progress.
//   - Rebinding: a waiter whose runtime is not the bound one, finding the poll idle (no
//     poll armed or arming; then no waiter is queued either), binds the state to its own
//     runtime and arms the poll there. While the poll is armed elsewhere it queues behind
//     it and is woken across, as above: nothing is refused.
//   - The bound runtime shut down or destroyed: its reactor's shutdown ends every poll it
//     holds (cancel, or disarm an arm request still in its inbox), which wakes every waiter
//     (its own are dropped: their frames are destroyed with their runtime; the others go to
//     their runtimes), and leaves the state idle. The next wait from a live runtime rebinds
//     it. So a task of runtime B waiting on a socket bound to A is not stranded by A's
//     destruction: it tries again on B, rebinds, and waits there (a with_timeout around it
//     fires as usual). Nothing dereferences a former binding once the poll is idle: the
//     only posts to the bound reactor are the arm (always to the waiter's own runtime,
//     after rebinding) and close()'s cancel (only while a poll is armed or arming, which
//     that reactor's shutdown ends before it returns; from another thread it posts under
//     the lock, and the shutdown looks at its inbox once more after the last poll ended).
//   Deadline waits do not use the bound reactor at all: their one-shot polls go to the
//   waiter's own (io/net/socket_deadline.cpp).
#pragma once

#include "private.hpp"

#include <atomic>
#include <cstdint>
#include <vector>

#include <eddy/io/detail/operation.hpp>
#include <eddy/io/detail/poll_waiter.hpp>
#include <eddy/tasks/detail/spin_lock.hpp>

namespace eddy::detail {

class PollState;

/// A PollState's two reactor requests (kPollArm, kPollCancel) are its bases, so that the
/// reactor finds the state from the node (PollState::of) without a pointer back: every
/// socket that ever waited has a state, and an idle connection pays for each word of it.
struct PollArmNode : ReactorNode {
    PollArmNode() noexcept : ReactorNode(Kind::kPollArm) {}
};
struct PollCancelNode : ReactorNode {
    PollCancelNode() noexcept : ReactorNode(Kind::kPollCancel) {}
};

class PollState : private PollArmNode, private PollCancelNode {
public:
    using Dir = PollWaiter::Dir;
    static constexpr Dir kRead = PollWaiter::kRead;
    static constexpr Dir kWrite = PollWaiter::kWrite;
    static constexpr std::uint32_t kReady = 1;    // word: the direction may be ready
    static constexpr std::uint32_t kFinal = 2;    // word: end of stream or error seen (sticky)
    static constexpr std::uint32_t kTickOne = 4;  // word: one event later
    enum class Arm : std::uint8_t { kIdle, kArming, kArmed };

    /// A new state for `fd`, held by the socket (one reference), bound to `reactor`'s
    /// runtime. Nothing is known about either direction yet, so both start ready: the next
    /// operation simply tries.
    PollState(int fd, Reactor& reactor) noexcept;
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
    /// Rebinds the state to w->home_'s runtime when the poll is idle (see "Runtimes").
    enum class Queue : std::uint8_t { kQueued, kRetry, kSettled };
    Queue queue(PollWaiter* w, Dir d, std::uint32_t seen) noexcept;
    /// The awaiter's destructor: leaves the queue if still on it (a frame destroyed while it
    /// waited: runtime shutdown).
    void leave(PollWaiter* w) noexcept;
    /// A stop callback: takes `w` off the queue and resumes its task with ECANCELED, or, if
    /// it is not queued (trying on a worker right now), marks it so that it does not queue.
    void cancel(PollWaiter* w) noexcept;

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
    /// Shutdown: the poll will never be armed or reported again. Wakes every waiter: those
    /// of `local`'s runtime are dropped (destroyed with it), the others queued on theirs.
    void disarm_for_shutdown(const Reactor* local) noexcept;

    int fd() const noexcept { return fd_; }
    /// Tests: the reactor the state is bound to (compared, never dereferenced).
    const Reactor* bound_reactor() noexcept;
    /// close() has run: a retry gives the closed result without touching the socket.
    /// Acquire: pairs with close()'s release store.
    bool closed() const noexcept { return closed_flag_.load(std::memory_order_acquire); }

    /// The state a kPollArm or kPollCancel node (one of its own) belongs to.
    static PollState* of(ReactorNode* n) noexcept {
        return n->kind == ReactorNode::Kind::kPollArm ? static_cast<PollState*>(static_cast<PollArmNode*>(n))
                                                      : static_cast<PollState*>(static_cast<PollCancelNode*>(n));
    }
    /// The request to arm the poll, and the one to cancel it (each posted at most once at a time).
    ReactorNode& arm_node() noexcept { return static_cast<PollArmNode&>(*this); }
    ReactorNode& cancel_node() noexcept { return static_cast<PollCancelNode&>(*this); }

private:
    friend class Reactor;  // the fields it alone uses, below
    ~PollState();
    void take(Dir d, PollWaiter*& chain) noexcept;  // under lock_: unlinks every waiter of d
    void link(PollWaiter* w, Dir d) noexcept;
    void unlink(PollWaiter* w, Dir d) noexcept;
    /// Under lock_: queues each waiter of `chain` whose runtime is not `local`'s on its own
    /// and takes it off the chain (see "Runtimes").
    static void wake_foreign(PollWaiter*& chain, const Reactor* local) noexcept;

    // In an order that packs them: 104 bytes with the two nodes, a malloc chunk of 112.
    // Reactor thread only: in the ring (armed), and the list of armed states.
    bool in_kernel_ = false;
    int fd_;  // -1 only in discard()
    PollState* prev_armed_ = nullptr;
    PollState* next_armed_ = nullptr;
    Reactor* reactor_;  // guarded by lock_: the bound runtime's (see "Runtimes")
    // Acquire loads by awaiters; stores and RMWs under lock_ or by CAS (see above).
    std::atomic<std::uint32_t> word_[2] = {kReady, kReady};
    // Acq_rel decrement in release(): the last holder sees every other holder's writes.
    std::atomic<std::uint32_t> refs_{1};
    SpinLock lock_;
    Arm arm_ = Arm::kIdle;                      // guarded by lock_
    bool closed_ = false;                       // guarded by lock_
    std::atomic<bool> closed_flag_{false};      // the same, for retries that do not lock
    PollWaiter* head_[2] = {nullptr, nullptr};  // guarded by lock_
    PollWaiter* tail_[2] = {nullptr, nullptr};  // guarded by lock_
};

// A socket's state lives as long as the socket once it has waited: 10,000 idle connections
// hold 10,000 of them (benchmarks/idle_load).
static_assert(sizeof(PollState) <= 104, "PollState grew: every socket that ever waited pays for it");

}  // namespace eddy::detail
