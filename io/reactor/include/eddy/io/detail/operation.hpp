// eddy/io/detail/operation.hpp: what an awaiting frame hands the reactor thread. Not for
// users: no stability promise.
//
// An operation lives in the awaiter, inside the awaiting coroutine's frame, from submission
// until the reactor resumes that frame: the kernel may write into its buffer until then,
// cancelled or not.
//
// # Cancellation protocol (cancel_flags)
//   request_cancel() (any thread, from a stop callback) sets kCancelRequested; if
//   neither flag was set before it pushes cancel_node to the reactor (once: the operation's
//   own token and its task's cancellation may both ask). The reactor, on the
//   operation's completion, sets kCompleted; if kCancelRequested was already set it knows a
//   cancel node is coming and resumes the frame only once that node has arrived. So the
//   cancel node never outlives the frame that holds it, and exactly one of the two sides
//   decides when the frame resumes.
//
// # Deadline (eddy::with_deadline, io/reactor/link_timeout.cpp)
//   An operation whose task has a deadline carries it in `deadline_ns`: the reactor submits
//   it (and a readiness poll on its behalf) linked to an IORING_OP_LINK_TIMEOUT, whose
//   timespec lives in `deadline_ts` until the CQE. Expiry cancels it in the kernel; the
//   reactor turns that -ECANCELED into kDeadlineResult (eddy/time/detail/deadline.hpp), and the
//   awaiter throws eddy::TimedOut. The operation's own cancellation works alongside.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stop_token>

#include <eddy/time/detail/deadline.hpp>
#include <eddy/tasks/detail/promise.hpp>

namespace eddy::detail {

class Reactor;
struct Operation;

/// A link in the reactor's inbox (an intrusive multi-producer stack).
struct ReactorNode {
    /// kPollArm, kPollCancel: requests about a socket's multishot poll (io/reactor/poll_state.hpp).
    enum class Kind : std::uint8_t { kIo, kCancel, kPollArm, kPollCancel };
    explicit ReactorNode(Kind k) noexcept : kind(k) {}
    ReactorNode* next = nullptr;
    const Kind kind;
};

/// The request to cancel `target`; embedded in the operation itself.
struct CancelNode : ReactorNode {
    explicit CancelNode(Operation* t) noexcept : ReactorNode(Kind::kCancel), target(t) {}
    Operation* const target;
};

/// struct __kernel_timespec, without the kernel header (io/reactor/link_timeout.cpp checks the layout).
struct KernelTimespec {
    std::int64_t tv_sec = 0;
    long long tv_nsec = 0;
};

struct Operation : ReactorNode {
    static constexpr std::uint8_t kCancelRequested = 1;
    static constexpr std::uint8_t kCompleted = 2;
    /// The reactor's view of the operation (reactor thread only).
    enum class Stage : std::uint8_t { kNew, kQueued, kInFlight, kPolling, kAwaitingCancel, kDone };

    explicit Operation(Kind k) noexcept : ReactorNode(k), cancel_node(this) {}
    Operation(const Operation&) = delete;
    Operation& operator=(const Operation&) = delete;

    /// What the reactor queues at completion: the awaiting frame, or a Runnable's queue item
    /// (eddy/runtime/detail/scheduler_api.hpp) stored as an address (a socket wait under a
    /// deadline, io/net/socket_deadline.cpp).
    std::coroutine_handle<> waiter{};
    Reactor* reactor = nullptr;
    /// The kernel's result: a count or -errno. Written by the reactor before it resumes (with
    /// the readiness driver, by the file pool's thread before it posts the operation back).
    std::int32_t result = 0;
    // kCancelRequested | kCompleted: see the protocol above. Acq_rel on both sides.
    std::atomic<std::uint8_t> cancel_flags{0};
    CancelNode cancel_node;

    // Reactor thread only.
    Stage stage = Stage::kNew;
    bool cancel_arrived = false;
    Operation* prev_in_flight = nullptr;
    Operation* next_in_flight = nullptr;
};

/// The kinds of I/O the reactor knows how to submit.
/// kPoll: a one-shot readiness wait (IORING_OP_POLL_ADD); `len` holds the poll(2) events,
/// the result is the revents.
/// kWaitId: waitid(P_PIDFD, fd, addr, op_flags) in the kernel (IORING_OP_WAITID, Linux 6.7;
/// only where reactor_has_waitid()): `addr` is the siginfo_t it fills, the result 0 or -errno.
/// Cancelled, it reaps nothing.
enum class IoKind : std::uint8_t {
    kRead,
    kWrite,
    kRecv,
    kSend,
    kAccept,
    kConnect,
    kRecvMsg,
    kSendMsg,
    kFsync,
    kOpenAt,
    kPoll,
    kReadv,
    kWritev,
    kStatx,
    kRenameAt,
    kUnlinkAt,
    kMkdirAt,
    kWaitId,
    kOpenAt2  // openat2(2): addr the path, offset the open_how (fs::File::open_beneath)
};

struct IoOperation : Operation {
    IoOperation() noexcept : Operation(Kind::kIo) {}
    IoKind io = IoKind::kRead;
    int fd = -1;
    void* addr = nullptr;                    // buffer, sockaddr, msghdr, iovec array or path
    std::uint32_t len = 0;                   // buffer length, iovec count, or open mode
    std::uint64_t offset = 0;                // file offset (~0: the current position), socklen_t*, statx* or new path
    std::uint32_t op_flags = 0;              // MSG_* flags, accept/open flags
    bool poll_first = false;                 // a non-blocking attempt just failed: wait for readiness first
    std::uint8_t driver_step = 0;            // reactor thread only: the readiness driver's progress (reactor_epoll.cpp)
    std::int64_t deadline_ns = kNoDeadline;  // see "Deadline" above; set before submission
    KernelTimespec deadline_ts;              // reactor thread only: the link timeout's, until submitted
    std::int64_t taken_ns = 0;               // reactor thread only: when it left the inbox (I/O latency)
};

/// The reactor of the runtime whose worker runs the calling thread. Throws eddy::WrongThread
/// naming `what` off a worker.
Reactor& current_reactor(const char* what);
/// Whether `reactor`'s ring has IORING_OP_WAITID (IoKind::kWaitId), probed once at its set-up.
bool reactor_has_waitid(const Reactor& reactor) noexcept;
/// Hands `op` to `reactor` (which resumes op.waiter). After this call the caller must not
/// touch `op`, its awaiter or its frame: the reactor may resume and destroy them at once.
void submit(Reactor& reactor, Operation& op) noexcept;
/// Asks the reactor to cancel `op` (see the protocol above). Any thread.
void request_cancel(Operation& op) noexcept;

/// Throws std::system_error for a negative kernel result; `what` names the operation.
[[noreturn]] void throw_io_error(int negative_errno, const char* what);
/// Throws std::system_error with the current errno and `what` (a synchronous call failed).
[[noreturn]] void throw_errno(const char* what);

/// Cancels an operation when its stop_token is triggered.
struct CancelOnStop {
    Operation* op;
    void operator()() const noexcept { request_cancel(*op); }
};

/// The two ways an operation is cancelled: the token passed to the call and the awaiting
/// task's cancellation (eddy/tasks/cancellation.hpp). Lives in the awaiter, beside the
/// operation, and must be destroyed before it: a callback's destructor waits for a
/// request_cancel() running on another thread.
class CancelRegistration {
public:
    /// Before submitting `op`: false when either token is stopped already (do not submit;
    /// the operation is cancelled). Otherwise registers both callbacks; one may fire at once,
    /// posting the cancel node ahead of the operation, which the reactor handles.
    bool arm(Operation& op, const std::stop_token& own, StopState* task) {
        if (own.stop_requested() || stop_requested(task)) return false;
        if (own.stop_possible()) own_.emplace(own, CancelOnStop{&op});
        if (task != nullptr) task_.emplace(*task, CancelOnStop{&op});
        return true;
    }
    /// Unregisters both (waits for a callback running on another thread): before the same
    /// operation is armed and submitted again.
    void disarm() noexcept {
        own_.reset();
        task_.reset();
    }

private:
    std::optional<std::stop_callback<CancelOnStop>> own_;
    StopCallback<CancelOnStop> task_;
};

}  // namespace eddy::detail
