// eddy/io/detail/io_awaiter.hpp: the awaiter of one io_uring operation. Not for users.
//
// `co_await` on it suspends the task, hands the operation to the reactor thread and resumes
// on a worker once the kernel's completion has arrived. The result is the kernel's count;
// an error is thrown as std::system_error carrying the errno, a cancelled operation as
// std::errc::operation_canceled. The awaiter (with the buffer it points to) must stay where
// it is until then: it is meant to be awaited as the temporary it is returned as.
#pragma once

#include <cerrno>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stop_token>
#include <system_error>

#include <eddy/io/detail/operation.hpp>

namespace eddy::detail {

/// Throws std::system_error for a negative kernel result; `what` names the operation.
[[noreturn]] void throw_io_error(int negative_errno, const char* what);
/// One non-blocking send(2) attempt (MSG_DONTWAIT | MSG_NOSIGNAL): the count, or -errno.
std::int32_t try_send(int fd, const void* data, std::size_t len) noexcept;
/// Closes the descriptor an accept or open produced if nobody took it: the frame was
/// destroyed (runtime shutdown) after the kernel's completion but before it resumed.
void close_unclaimed(const IoOperation& op) noexcept;
/// One preadv2(RWF_NOWAIT) attempt (page cache only, never blocks): the count, or -errno
/// (-EAGAIN when the data is not cached or the descriptor is not ready).
std::int32_t try_read(int fd, void* data, std::size_t len, std::uint64_t offset) noexcept;
/// One non-blocking recv(2) attempt (MSG_DONTWAIT): the count, or -errno.
std::int32_t try_recv(int fd, void* data, std::size_t len) noexcept;

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
    IoAwaiter(const IoRequest& r, const char* what, std::stop_token token = {}) noexcept
        : what_(what), token_(std::move(token)) {
        op_.io = r.kind;
        op_.fd = r.fd;
        op_.addr = r.addr;
        op_.len = static_cast<std::uint32_t>(r.len < kMaxTransfer ? r.len : kMaxTransfer);
        op_.offset = r.offset;
        op_.op_flags = r.flags;
    }
    IoAwaiter(const IoAwaiter&) = delete;
    IoAwaiter& operator=(const IoAwaiter&) = delete;
    ~IoAwaiter() {
        if (!delivered_ && (op_.io == IoKind::kAccept || op_.io == IoKind::kOpenAt)) close_unclaimed(op_);
    }

    IoOperation& op() noexcept { return op_; }

    bool await_ready() noexcept {
        if (token_.stop_requested()) {
            op_.result = -ECANCELED;
            return true;
        }
        if (op_.io == IoKind::kSend) {
            // Fast path: a socket write usually fits in the send buffer. Only EAGAIN (the
            // buffer is full) goes to the reactor, which waits for room.
            op_.result = try_send(op_.fd, op_.addr, op_.len);
            op_.poll_first = op_.result == -EAGAIN || op_.result == -EWOULDBLOCK;
            return !op_.poll_first;
        }
        if (op_.io == IoKind::kRead) {
            // A read that the page cache (or a ready pipe) can serve is served here, on the
            // worker: no reactor round trip. Only what would block goes to the ring.
            op_.result = try_read(op_.fd, op_.addr, op_.len, op_.offset);
            return op_.result != -EAGAIN && op_.result != -EWOULDBLOCK && op_.result != -EOPNOTSUPP;
        }
        if (op_.io == IoKind::kRecv) {
            // Likewise for a socket read: data that is already there is taken at once.
            op_.result = try_recv(op_.fd, op_.addr, op_.len);
            op_.poll_first = op_.result == -EAGAIN || op_.result == -EWOULDBLOCK;
            return !op_.poll_first;
        }
        return false;
    }

    void await_suspend(std::coroutine_handle<> h) {
        Reactor& reactor = current_reactor(what_);
        op_.waiter = h;
        op_.reactor = &reactor;
        if (token_.stop_possible()) on_stop_.emplace(token_, CancelOnStop{&op_});
        submit(reactor, op_);  // the last touch: see operation.hpp
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
    std::optional<std::stop_callback<CancelOnStop>> on_stop_;
};

} // namespace eddy::detail
