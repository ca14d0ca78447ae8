// io/reactor/file_pool.hpp: the readiness driver's threads for the operations epoll cannot wait
// for (reactor_epoll.cpp): reads and writes of regular files and block devices, fsync, and the
// path operations (openat, statx, renameat, unlinkat, mkdirat). Tokio reads files on its
// blocking pool for the same reason: a regular file is always "ready", and its read blocks.
//
// # Flow
//   The reactor thread hands an operation over (run()); a thread of the pool takes it, makes
//   the system call (retried on EINTR), stores the result in op->result and posts the
//   operation back to the reactor's inbox (Reactor::post), which completes it as it would a
//   completion from the kernel. The pool never resumes a frame and never reads the operation
//   again after posting it: from then on the frame may be resumed and gone.
//   Threads start on demand, one whenever an operation arrives and more are queued than
//   threads sleep idle, up to kMaxThreads, and stay until shutdown() (idle ones sleep on the
//   condition variable). At kMaxThreads, operations wait in the queue for a thread. Each runs
//   RuntimeConfig::on_thread_start once named and on_thread_stop last, as every thread of the
//   runtime does.
//
// # Cancellation and shutdown
//   An operation still queued can be taken back (withdraw(): it never ran, its buffer was
//   never touched); one that a thread has started runs to its end, as an io_uring file read
//   does, and its result stands. shutdown() takes back every queued operation, waits for
//   those running and joins the threads: afterwards no thread of the pool touches a frame.
#pragma once

#include "private.hpp"

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <eddy/io/detail/operation.hpp>
#include <eddy/runtime/config.hpp>

namespace eddy::detail {

class Reactor;

class FilePool {
public:
    /// At most this many threads: enough for a disk's queue, few enough for a container.
    static constexpr std::size_t kMaxThreads = 16;

    /// `thread_name`: what the pool's threads are called (the runtime's "<prefix>-io");
    /// `config`: the runtime's, for its thread hooks (it outlives the pool).
    FilePool(Reactor& reactor, std::string thread_name, const RuntimeConfig& config);
    ~FilePool();
    FilePool(const FilePool&) = delete;
    FilePool& operator=(const FilePool&) = delete;

    /// Reactor thread: runs `op`'s system call on a pool thread; `op` comes back through the
    /// reactor's inbox with its result set. Throws std::system_error when no thread can be
    /// started and none exists (the caller completes the operation with EAGAIN).
    void run(IoOperation* op);
    /// Reactor thread: takes `op` back if no thread has started it (true: it never ran).
    bool withdraw(IoOperation* op) noexcept;
    /// Reactor thread, at shutdown: takes back what waits, lets what runs finish, joins the
    /// threads. Idempotent.
    void shutdown() noexcept;

    /// The system call of `op` (a kind FilePool takes), made here and now, blocking:
    /// a count, a descriptor or 0, or -errno.
    static std::int32_t call(const IoOperation& op) noexcept;
    /// Whether `k` is one of the path or file-only kinds that always go to the pool.
    static bool always_pooled(IoKind k) noexcept;

private:
    void thread_main() noexcept;  // a pool thread, from its name to its stop hook
    void work() noexcept;

    Reactor& reactor_;
    const std::string name_;
    const RuntimeConfig& config_;
    std::mutex mu_;
    std::condition_variable cv_;        // an operation was queued, or stop_ was set
    std::deque<IoOperation*> queue_;    // guarded by mu_
    std::size_t idle_ = 0;              // guarded by mu_: threads waiting on cv_
    bool stop_ = false;                 // guarded by mu_
    std::vector<std::thread> threads_;  // reactor thread only
};

}  // namespace eddy::detail
