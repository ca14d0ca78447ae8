// io/reactor/file_pool.cpp: io/reactor/file_pool.hpp.
#include "reactor/file_pool.hpp"

#include "reactor/reactor.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <utility>

namespace eddy::detail {

namespace {

/// Offset ~0: the descriptor's own position, as for an io_uring read.
constexpr std::uint64_t kCurrentPosition = ~std::uint64_t{0};

std::int64_t syscall_once(const IoOperation& op) noexcept {
    const auto off = static_cast<off_t>(op.offset);
    const bool here = op.offset == kCurrentPosition;
    const auto* path = static_cast<const char*>(op.addr);
    switch (op.io) {
    case IoKind::kRead:
        return here ? ::read(op.fd, op.addr, op.len) : ::pread(op.fd, op.addr, op.len, off);
    case IoKind::kWrite:
        return here ? ::write(op.fd, op.addr, op.len) : ::pwrite(op.fd, op.addr, op.len, off);
    // The "2" forms: their offset -1 is the descriptor's position (a pipe has no other).
    case IoKind::kReadv:
        return ::preadv2(op.fd, static_cast<const iovec*>(op.addr), static_cast<int>(op.len), here ? -1 : off, 0);
    case IoKind::kWritev:
        return ::pwritev2(op.fd, static_cast<const iovec*>(op.addr), static_cast<int>(op.len), here ? -1 : off, 0);
    case IoKind::kFsync:
        // IORING_FSYNC_DATASYNC (1) is the one flag an io_uring fsync takes.
        return (op.op_flags & 1u) != 0 ? ::fdatasync(op.fd) : ::fsync(op.fd);
    case IoKind::kOpenAt:
        return ::openat(op.fd, path, static_cast<int>(op.op_flags), static_cast<mode_t>(op.len));
    case IoKind::kOpenAt2:
        return ::syscall(SYS_openat2, op.fd, path,
                         reinterpret_cast<const open_how*>(static_cast<std::uintptr_t>(op.offset)), sizeof(open_how));
    case IoKind::kStatx:
        return ::statx(op.fd, path, static_cast<int>(op.op_flags), op.len,
                       reinterpret_cast<struct statx*>(static_cast<std::uintptr_t>(op.offset)));
    case IoKind::kRenameAt:
        return ::renameat2(op.fd, path, op.fd, reinterpret_cast<const char*>(static_cast<std::uintptr_t>(op.offset)),
                           op.op_flags);
    case IoKind::kUnlinkAt:
        return ::unlinkat(op.fd, path, static_cast<int>(op.op_flags));
    case IoKind::kMkdirAt:
        return ::mkdirat(op.fd, path, static_cast<mode_t>(op.len));
    default:  // a kind the pool does not take (reactor_epoll.cpp never hands one over)
        errno = EOPNOTSUPP;
        return -1;
    }
}

}  // namespace

std::int32_t FilePool::call(const IoOperation& op) noexcept {
    for (;;) {
        const std::int64_t r = syscall_once(op);
        if (r >= 0) return static_cast<std::int32_t>(r);
        if (errno != EINTR) return -errno;
    }
}

bool FilePool::always_pooled(IoKind k) noexcept {
    return k == IoKind::kFsync || k == IoKind::kOpenAt || k == IoKind::kOpenAt2 || k == IoKind::kStatx ||
           k == IoKind::kRenameAt || k == IoKind::kUnlinkAt || k == IoKind::kMkdirAt;
}

FilePool::FilePool(Reactor& reactor, std::string thread_name, const RuntimeConfig& config)
    : reactor_(reactor), name_(std::move(thread_name)), config_(config) {}

FilePool::~FilePool() { shutdown(); }

void FilePool::run(IoOperation* op) {
    {
        std::lock_guard lock(mu_);
        queue_.push_back(op);
        // Each queued operation needs a thread of its own: an idle one may be notified and
        // still asleep, its wake-up spoken for by an operation queued before this one (which
        // may block for good, a FIFO's open waiting for this very operation's writer).
        if (queue_.size() <= idle_ || threads_.size() >= kMaxThreads) {
            cv_.notify_one();
            return;
        }
    }
    // Not enough idle threads: start one (it takes this operation or the next). On failure
    // the operation goes back to the caller unless a thread exists to take it later.
    try {
        threads_.emplace_back([this] { thread_main(); });
    } catch (const std::system_error&) {
        if (!threads_.empty()) return;
        std::lock_guard lock(mu_);
        queue_.erase(std::find(queue_.begin(), queue_.end(), op));
        throw;
    }
}

bool FilePool::withdraw(IoOperation* op) noexcept {
    std::lock_guard lock(mu_);
    const auto it = std::find(queue_.begin(), queue_.end(), op);
    if (it == queue_.end()) return false;
    queue_.erase(it);
    return true;
}

void FilePool::shutdown() noexcept {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
        queue_.clear();  // never started: their frames are destroyed with the runtime
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
}

void FilePool::thread_main() noexcept {
    DriverHost::name_this_thread(name_);  // before the start hook, which may want to see it
    DriverHost::run_thread_hook(config_.on_thread_start, "on_thread_start");
    work();
    DriverHost::run_thread_hook(config_.on_thread_stop, "on_thread_stop");
}

void FilePool::work() noexcept {
    // A write to a pipe whose reader is gone must give EPIPE, not kill the process (as on the
    // reactor thread, reactor_setup.cpp).
    sigset_t pipe_only;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, nullptr);
    std::unique_lock lock(mu_);
    for (;;) {
        ++idle_;
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        --idle_;
        if (stop_) return;
        IoOperation* op = queue_.front();
        queue_.pop_front();
        lock.unlock();
        op->result = call(*op);
        // From here on `op` may be resumed and destroyed: only the reactor is touched.
        reactor_.post(*op);
        lock.lock();
    }
}

}  // namespace eddy::detail
