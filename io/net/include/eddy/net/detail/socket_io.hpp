// eddy/net/detail/socket_io.hpp: readiness-based socket I/O, the path of TcpStream and
// TcpListener. Not for users: no stability promise.
//
// # Why readiness, not one io_uring operation per read
// A read that finds no data used to become an io_uring recv on the reactor thread: a post
// to its inbox, an eventfd write to wake it, a submission, and the completion back through
// the injection queue. Now a socket that has to wait gets one multishot poll in the ring,
// armed once for its life (PollState, io/reactor/poll_state.hpp). An operation tries the socket on
// the worker (recv/send with MSG_DONTWAIT, accept4 on a non-blocking listener); only when
// that would block does it queue itself on the socket's PollState, which costs a spin lock
// and no system call. When the kernel reports the socket ready, the reactor takes the
// waiters off and queues each one's retry (a Runnable, scheduler_api.hpp) on the workers,
// which tries again and resumes the task once the operation settled. Nothing goes from a
// worker to the reactor in the steady state. (The figures are in the README.)
//
// # Readiness words, one per direction (PollState::word)
//   tick << 1 | ready. The reactor bumps the tick and sets `ready` for every event of that
//   direction; an operation that found the socket not ready clears `ready` (under the lock,
//   and only if the word is still the one it read before trying: a newer event means "try
//   again"). A read that returned less than it asked for clears it too (the socket is very
//   probably empty; if it is not, an event is on its way). So an idle socket costs no
//   failed recv, and no event between an attempt and the queuing is ever lost.
//
// # Cancellation, closing, lifetime
//   A cancel (the call's token or the task's) takes a queued waiter off and resumes its
//   task with ECANCELED; nothing is in the kernel's hands, so nothing is lost. close() wakes
//   every waiter (a read then returns 0, an accept fails with EINVAL, a write with EPIPE).
//   The PollState owns a reference count: the socket object, every waiting awaiter, the
//   armed poll and each node on its way to the reactor hold one; the descriptor is closed
//   when the last goes, so a retry running on another worker never uses a closed (or
//   reused) descriptor number.
//
// # Across runtimes
//   A socket may be used by tasks of several runtimes, one after the other or at once: each
//   operation resumes on the runtime of the task that awaits it, and the state moves to the
//   runtime that waits when its poll is idle, including after the runtime it was bound to
//   was shut down or destroyed (io/reactor/poll_state.hpp, "Runtimes").
//
// # Under a deadline (eddy::with_deadline)
//   A multishot poll cannot carry a linked timeout, and the shared one serves every waiter of
//   the socket. So an operation whose task has a deadline, and that has to wait, does not
//   queue on the PollState: it submits a one-shot IORING_OP_POLL_ADD of its own direction,
//   linked to an IORING_OP_LINK_TIMEOUT on the deadline (io/reactor/link_timeout.cpp), and tries
//   again on a worker when the poll completes, until it settles or the kernel cancels the
//   poll at the deadline (eddy::TimedOut). That keeps the operation itself on the worker
//   (no buffer handed to the kernel, the same attempt code and the same results) and is
//   one readiness poll per wait, which the caller chose by asking for a deadline. It holds
//   a PollState reference like any waiter, so the descriptor stays open meanwhile.
//   Cancellation cancels the poll in the kernel (OperationCancelled). close() from another
//   task ends a read or an accept at once (SHUT_RD makes the socket readable); a write that
//   waits for room under a deadline sees the close only at its next attempt, at the latest
//   at the deadline. Without a deadline nothing changes: the check is one branch on the
//   path that waits, and the fast path does not look at it (io/net/socket_deadline.cpp).
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <cassert>
#include <cerrno>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <stop_token>
#include <utility>

#include <eddy/io/detail/poll_waiter.hpp>
#include <eddy/io/file_descriptor.hpp>
#include <eddy/runtime/detail/coop_budget.hpp>
#include <eddy/runtime/detail/scheduler_api.hpp>
#include <eddy/tasks/detail/promise.hpp>

namespace eddy::detail {

class PollState;
class Reactor;
class SocketAwaiter;
class SocketDeadlineWait;
/// Frees a socket operation's wait under a deadline (nullptr: nothing), once its poll is over.
void end_deadline_wait(SocketDeadlineWait* w) noexcept;

/// A socket's descriptor and, from its first wait on, its PollState. Owned by the socket
/// types; move-only; closes on destruction.
class SocketIo {
public:
    SocketIo() noexcept = default;
    explicit SocketIo(io::FileDescriptor fd) noexcept : fd_(fd.release()) {}
    SocketIo(SocketIo&& other) noexcept
        : fd_(std::exchange(other.fd_, -1)),
          nonblocking_(other.nonblocking_.exchange(false, std::memory_order_relaxed)),
          state_(other.state_.exchange(nullptr, std::memory_order_acq_rel)) {}
    SocketIo& operator=(SocketIo&& other) noexcept {
        if (this != &other) {
            release();
            fd_ = std::exchange(other.fd_, -1);
            nonblocking_.store(other.nonblocking_.exchange(false, std::memory_order_relaxed),
                               std::memory_order_relaxed);
            state_.store(other.state_.exchange(nullptr, std::memory_order_acq_rel), std::memory_order_release);
        }
        return *this;
    }
    SocketIo(const SocketIo&) = delete;
    SocketIo& operator=(const SocketIo&) = delete;
    ~SocketIo() { release(); }

    /// The descriptor, -1 once closed.
    int fd() const noexcept { return fd_; }
    /// Closes now: shutdown(SHUT_RD) first, so that a read pending in another task returns
    /// 0 and an accept fails with EINVAL; a pending write fails with EPIPE. The descriptor
    /// itself is closed at once, or, while the reactor or a retry still uses it, as soon as
    /// they let go (its number is not reused before). std::system_error from close(2).
    void close();
    /// Sets O_NONBLOCK on the descriptor, once: what sendfile(2) needs to return EAGAIN
    /// instead of blocking the worker (the other operations pass MSG_DONTWAIT, so they do
    /// not mind). std::system_error (`what`) from fcntl(2), EBADF once closed.
    void make_nonblocking(const char* what);

private:
    friend class SocketAwaiter;
    void release() noexcept;  // close, ignoring errors
    int fd_ = -1;
    // Set by make_nonblocking(). Relaxed: only saves repeating an idempotent fcntl.
    std::atomic<bool> nonblocking_{false};
    // Installed by the first operation that has to wait, with a CAS: two tasks whose first
    // operations on the socket wait at the same moment (two accepts, a read and a write)
    // must share one state and one poll. Release on install, acquire on load: the state's
    // construction is published with it.
    std::atomic<PollState*> state_{nullptr};
};

/// The awaiter of one socket operation. `co_await` gives the count (recv, send) or the new
/// descriptor (accept); errors throw std::system_error with the errno, cancellation
/// eddy::OperationCancelled. Movable until first awaited, never after.
class SocketAwaiter : private PollWaiter, private StopRegistration {
public:
    /// Points into the caller's socket and buffer: awaited in place, never spawned
    /// (eddy/tasks/awaitable.hpp).
    using borrows_operands = void;
    /// kSendAll sends until all `len` bytes are out (waiting whenever the socket is full),
    /// and gives `len`; kSendFile likewise from a file (sendfile(2)), and gives fewer only
    /// when the file ends first; the others give what one call did. kRecvMsg/kSendMsg are
    /// one recvmsg(2)/sendmsg(2) (vectored I/O, datagrams with addresses, ancillary data).
    /// kPeek is a recv(2) of `len` bytes with MSG_PEEK: it waits until a read would not
    /// (bytes are there, or the end of the stream) and takes nothing.
    enum class Op : std::uint8_t { kRecv, kSend, kSendAll, kAccept, kRecvMsg, kSendMsg, kSendFile, kPeek };

    /// kRecv/kSend/kSendAll: `buf`, `len`. kAccept: `buf` a sockaddr* (or null), `addrlen`
    /// its length. kRecvMsg/kSendMsg: `buf` a msghdr* (its buffers, name and control live
    /// until the co_await returns; recvmsg fills in its msg_flags, e.g. MSG_TRUNC), `len`
    /// unused. kSendFile: `buf` a FileRange*, `len` the bytes to send.
    SocketAwaiter(SocketIo& io, Op op, void* buf, std::size_t len, const char* what, std::stop_token token = {},
                  socklen_t* addrlen = nullptr) noexcept
        : PollWaiter(&SocketAwaiter::retry, dir_of(op), closed_result(op)),
          StopRegistration(&SocketAwaiter::task_stopped), io_(&io), buf_(buf), len_(len), what_(what), op_(op),
          token_(std::move(token)) {
        if (op == Op::kAccept) addrlen_ = addrlen;
    }
    /// Movable until first awaited, like a Rust future before its first poll: the operation
    /// and the token go along; `o` never tried nor waited, so its destructor does nothing.
    SocketAwaiter(SocketAwaiter&& o) noexcept : SocketAwaiter(std::move(o), o.buf_) {}
    SocketAwaiter(const SocketAwaiter&) = delete;
    SocketAwaiter& operator=(const SocketAwaiter&) = delete;
    ~SocketAwaiter() {
        if (state_ != nullptr || (op_ == Op::kAccept && !delivered_ && result_ >= 0 && tried_)) finish();
    }

    bool await_ready() const noexcept { return false; }
    /// Task dumps: "eddy::TcpStream::read fd 9".
    void dump_wait(DumpWait& d) const {
        d.text(what_);
        d.text(" fd ");
        d.number(io_->fd());
    }
    /// Does not suspend when the operation settles at once (or the call's token or the
    /// task's cancellation is stopped already: ECANCELED).
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) {
        // What settles at once spends a unit of the cooperative budget (eddy/runtime/coop.hpp).
        return suspend(h, cancellation_scope_of(h)) || coop_yield(h);
    }
    std::size_t await_resume();

protected:
    /// The move, with `buf` for the new object: a buffer inside the awaiter itself (a
    /// VectoredAwaiter's msghdr) is found at its new place.
    SocketAwaiter(SocketAwaiter&& o, void* buf) noexcept
        : PollWaiter(&SocketAwaiter::retry, o.dir_, o.closed_result_), StopRegistration(&SocketAwaiter::task_stopped),
          io_(o.io_), buf_(buf), len_(o.len_), what_(o.what_), op_(o.op_), token_(std::move(o.token_)) {
        assert(!o.tried_ && !o.frame_ && o.result_ == 0 && !o.delivered_ &&
               "eddy: a socket awaiter moved after it was awaited");
        if (op_ == Op::kAccept) addrlen_ = o.addrlen_;
    }

private:
    friend class PollState;
    friend class SocketDeadlineWait;
    struct CancelWait {
        SocketAwaiter* self;
        void operator()() const noexcept;
    };

    /// The direction an operation waits for.
    static constexpr Dir dir_of(Op op) noexcept {
        return op == Op::kSend || op == Op::kSendAll || op == Op::kSendMsg || op == Op::kSendFile ? kWrite : kRead;
    }
    /// What an operation gives once its socket was closed by close() (see SocketIo::close):
    /// a read the end of the stream, as a read racing close() would see; a write EPIPE; an
    /// accept EINVAL, as accept(2) says after shutdown.
    static constexpr std::int32_t closed_result(Op op) noexcept {
        switch (op) {
        case Op::kRecv:
        case Op::kRecvMsg:
        case Op::kPeek:
            return 0;
        case Op::kSend:
        case Op::kSendMsg:
        case Op::kSendAll:
        case Op::kSendFile:
            return -EPIPE;
        case Op::kAccept:
            return -EINVAL;
        }
        return -EBADF;
    }

    bool suspend(std::coroutine_handle<> h, const TaskCancellation* scope);
    /// Under a deadline: waits on a poll of its own (io/net/socket_deadline.cpp); as suspend().
    bool wait_with_deadline(std::int64_t deadline_ns, StopState* task);
    /// One attempt on the worker; false when it would block (then result_ is -EAGAIN).
    bool attempt() noexcept;
    /// Tries and, while the socket is not ready, queues itself. True: settled (result_ set);
    /// false: queued, and the caller must touch nothing of this awaiter any more. `woken`:
    /// called by retry(), after the socket's poll reported an event (a kPeek takes the
    /// report as its answer; see ReadableAwaiter).
    bool settle_or_wait(bool woken = false) noexcept;
    static void retry(Runnable* r) noexcept;
    /// The task's cancellation (the StopRegistration base, registered while the operation waits).
    static void task_stopped(StopRegistration* r) noexcept;
    /// A read or a write that moved less than asked (kSendAll never settles short). Not for
    /// the message operations: a short datagram says nothing about what else is queued.
    bool short_transfer() const noexcept {
        return result_ >= 0 && (op_ == Op::kRecv || op_ == Op::kSend) && static_cast<std::size_t>(result_) < len_;
    }
    void finish() noexcept;  // leaves the PollState (destructor), closes an unclaimed accept

    SocketIo* io_;
    void* buf_;
    std::size_t len_;
    union {
        std::size_t done_ = 0;  // kSendAll, kSendFile: bytes sent so far
        socklen_t* addrlen_;    // kAccept
    };
    const char* what_;
    PollState* state_ = nullptr;  // set by the first wait: holds a reference
    // The PollWaiter base: home_ (set by the first wait: the reactor of the runtime this
    // operation runs on), frame_, result_, and the links the state guards.
    SocketDeadlineWait* deadline_wait_ = nullptr;  // owned: a wait under a deadline
    const Op op_;
    bool tried_ = false;      // an attempt ran (result_ is meaningful)
    bool delivered_ = false;  // await_resume took the result
    std::stop_token token_;
    // The call's token's callback, made only when the operation waits with a token that can
    // stop: a std::stop_callback is 56 bytes, and every awaiter of every frame that reads or
    // writes would carry them, tokens or not (an idle connection's frame holds two awaiters).
    // Owned; finish() deletes it before anything else: its destructor waits for a cancel
    // running on another thread.
    std::stop_callback<CancelWait>* own_cancel_ = nullptr;
    // The task's cancellation is the StopRegistration base: no pointer back to this awaiter.
};

// Every frame that reads or writes a socket holds these bytes, and with g++ (12) one awaiter
// per `co_await` on a socket: an echo loop's frame holds two for each of its connections, idle
// or not. Clang (14) lets awaiters of different suspensions share their bytes (that loop's
// frame: 4392 bytes with clang, 4648 with g++). Measure benchmarks/idle_load before letting
// this grow.
static_assert(sizeof(SocketAwaiter) <= 168, "SocketAwaiter grew: every frame that reads or writes a socket pays");

/// Where a kSendFile operation takes its bytes: a file's descriptor and the first offset.
struct FileRange {
    int fd = -1;
    std::uint64_t offset = 0;
};

/// A file range sent with sendfile(2) (SocketStream::send_file): the range lives in the
/// awaiter, where the operation's buffer pointer points. Sets O_NONBLOCK on the socket
/// before its first attempt (sendfile has no MSG_DONTWAIT; see socket_stream.hpp).
class SendFileAwaiter : public SocketAwaiter {
public:
    SendFileAwaiter(SocketIo& io, FileRange range, std::size_t count, const char* what, std::stop_token token) noexcept
        : SocketAwaiter(io, Op::kSendFile, &range_, count, what, std::move(token)), range_(range) {}
    /// Movable until first awaited (SocketAwaiter asserts it); the operation points at the
    /// new object's range.
    SendFileAwaiter(SendFileAwaiter&& o) noexcept : SocketAwaiter(std::move(o), &range_), range_(o.range_) {}

private:
    FileRange range_;
};

/// A wait until a stream socket has something to read (SocketStream::readable): a peek at one
/// byte, kept in the awaiter, where the operation's buffer pointer points. The peek answers
/// at once when it can; once the wait was woken by the poll's report of bytes, the report is
/// the answer (settle_or_wait), so that "wait, then read" costs the read's system call only.
class ReadableAwaiter : public SocketAwaiter {
public:
    ReadableAwaiter(SocketIo& io, const char* what, std::stop_token token) noexcept
        : SocketAwaiter(io, Op::kPeek, &byte_, 1, what, std::move(token)) {}
    /// Movable until first awaited (SocketAwaiter asserts it); the peek lands in the new
    /// object's byte.
    ReadableAwaiter(ReadableAwaiter&& o) noexcept : SocketAwaiter(std::move(o), &byte_) {}

private:
    std::byte byte_{};
};

/// One recvmsg/sendmsg over an iovec array (TcpStream::read_vectored, write_vectored): the
/// msghdr lives in the awaiter, where the operation's buffer pointer points.
class VectoredAwaiter : public SocketAwaiter {
public:
    VectoredAwaiter(SocketIo& io, bool write, const iovec* iov, std::size_t count, const char* what,
                    std::stop_token token) noexcept
        : SocketAwaiter(io, write ? Op::kSendMsg : Op::kRecvMsg, &msg_, 0, what, std::move(token)) {
        msg_.msg_iov = const_cast<iovec*>(iov);
        msg_.msg_iovlen = count;
    }
    /// Movable until first awaited (SocketAwaiter asserts it); the operation points at the
    /// new object's msghdr.
    VectoredAwaiter(VectoredAwaiter&& o) noexcept : SocketAwaiter(std::move(o), &msg_), msg_(o.msg_) {}

private:
    msghdr msg_{};
};

}  // namespace eddy::detail
