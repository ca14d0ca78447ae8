// eddy/io/detail/io_awaiter.hpp: the awaiter of one io_uring operation. Not for users.
//
// `co_await` on it suspends the task, hands the operation to the reactor thread and resumes
// on a worker once the kernel's completion has arrived. The result is the kernel's count;
// an error is thrown as std::system_error carrying the errno, a cancelled operation (its
// token, or the awaiting task's cancellation) as eddy::OperationCancelled, one whose
// deadline passed (eddy::with_deadline) as eddy::TimedOut. The awaiter (with the buffer it points to) must stay where
// it is until then: it moves only before it is first awaited.
#pragma once

#include <cassert>
#include <cerrno>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stop_token>
#include <system_error>

#include <eddy/io/detail/operation.hpp>
#include <eddy/runtime/detail/coop_budget.hpp>
#include <eddy/tasks/detail/promise.hpp>

namespace eddy::detail {

/// Closes the descriptor an accept or open produced if nobody took it: the frame was
/// destroyed (runtime shutdown) after the kernel's completion but before it resumed.
void close_unclaimed(const IoOperation& op) noexcept;
/// The fast path on the worker, for the kinds that have one: one non-blocking attempt
/// (send/recv with MSG_DONTWAIT, a read with preadv2(RWF_NOWAIT), served from the page cache
/// or a ready pipe). True when it settled the operation (op.result is the count or -errno);
/// false when the operation must go to the reactor (then op.poll_first says whether the
/// kernel should wait for readiness before trying).
bool try_now(IoOperation& op) noexcept;

/// What to submit: the fields of IoOperation (see operation.hpp for their meaning).
struct IoRequest {
    IoKind kind;
    int fd;
    void* addr = nullptr;
    std::size_t len = 0;
    std::uint64_t offset = ~std::uint64_t{0};
    std::uint32_t flags = 0;
};

/// The largest transfer one operation asks for (the kernel's result is an int).
inline constexpr std::size_t kMaxTransfer = std::size_t{1} << 30;

class IoAwaiter {
public:
    /// Points into the caller's descriptor and buffer: awaited in place, never spawned
    /// (eddy/tasks/awaitable.hpp).
    using borrows_operands = void;
    IoAwaiter(const IoRequest& r, const char* what, std::stop_token token = {}) noexcept
        : what_(what), token_(std::move(token)) {
        op_.io = r.kind;
        op_.fd = r.fd;
        op_.addr = r.addr;
        op_.len = static_cast<std::uint32_t>(r.len < kMaxTransfer ? r.len : kMaxTransfer);
        op_.offset = r.offset;
        op_.op_flags = r.flags;
    }
    /// Movable until first awaited, like a Rust future before its first poll: the request
    /// and the token go along; `o` never ran (stage kNew), so its destructor closes nothing.
    IoAwaiter(IoAwaiter&& o) noexcept : what_(o.what_), token_(std::move(o.token_)) {
        assert(!o.op_.waiter && o.op_.result == 0 && !o.delivered_ &&
               "eddy: an I/O awaiter moved after it was awaited");
        op_.io = o.op_.io;
        op_.fd = o.op_.fd;
        op_.addr = o.op_.addr;
        op_.len = o.op_.len;
        op_.offset = o.op_.offset;
        op_.op_flags = o.op_.op_flags;
    }
    IoAwaiter(const IoAwaiter&) = delete;
    IoAwaiter& operator=(const IoAwaiter&) = delete;
    ~IoAwaiter() {
        if (!delivered_ && (op_.io == IoKind::kAccept || op_.io == IoKind::kOpenAt || op_.io == IoKind::kOpenAt2))
            close_unclaimed(op_);
    }

    IoOperation& op() noexcept { return op_; }
    /// Task dumps: "eddy::File::read fd 7".
    void dump_wait(DumpWait& d) const {
        d.text(what_);
        if (op_.fd >= 0) {
            d.text(" fd ");
            d.number(op_.fd);
        }
    }

    bool await_ready() const noexcept { return false; }

    /// Never suspends when the call's token or the task's cancellation is stopped already
    /// (the result is then ECANCELED), nor when one non-blocking attempt settles the
    /// operation: a socket write usually fits in the send buffer, and data already there
    /// (socket, page cache, pipe) is taken at once. Only what would block goes to the reactor.
    /// What completes at once spends a unit of the cooperative budget (eddy/runtime/coop.hpp).
    ///
    /// Under a deadline (eddy::with_deadline), what goes to the reactor carries it (see
    /// operation.hpp); a deadline that has passed already fails it here (eddy::TimedOut)
    /// without submitting. What settles at once keeps its value, whatever the deadline.
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) {
        const TaskCancellation* scope = cancellation_scope_of(h);
        StopState* task = scope != nullptr ? scope->get() : nullptr;
        if (token_.stop_requested() || stop_requested(task)) {
            op_.result = -ECANCELED;
            return false;
        }
        if (try_now(op_)) return coop_yield(h);  // eddy/runtime/coop.hpp
        if (const std::int64_t deadline = io_deadline_of(scope); deadline != kNoDeadline) [[unlikely]] {
            if (deadline_passed(deadline)) {
                op_.result = kDeadlineResult;
                return false;
            }
            op_.deadline_ns = deadline;
        }
        Reactor& reactor = current_reactor(what_);
        op_.waiter = h;
        op_.reactor = &reactor;
        if (!cancel_.arm(op_, token_, task)) {
            op_.result = -ECANCELED;
            return false;
        }
        submit(reactor, op_);  // the last touch: see operation.hpp
        return true;
    }

    std::size_t await_resume() {
        delivered_ = true;
        if (op_.result < 0) throw_io_error(op_.result, what_);
        return static_cast<std::size_t>(op_.result);
    }

private:
    IoOperation op_;
    const char* what_;
    bool delivered_ = false;  // await_resume took the result
    std::stop_token token_;
    // Destroyed before op_: its destructor waits for a callback running on another thread.
    CancelRegistration cancel_;
};

}  // namespace eddy::detail
