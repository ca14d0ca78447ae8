// runtime/blocking_pool.hpp: the threads that run eddy::spawn_blocking calls, apart from the
// workers, so that a blocking call (a file system walk, a DNS lookup through getaddrinfo, a
// synchronous client library, a CPU-heavy step) never holds a worker.
//
// Threads start on demand: a call that finds no idle thread starts one while fewer than
// RuntimeConfig::max_blocking_threads are alive, else waits in a FIFO queue. An idle thread
// exits after blocking_keep_alive without work. Each runs the on_thread_start/on_thread_stop
// hooks and is named "<prefix>-blocking".
//
// # Shutdown (close(), from Scheduler::shutdown once the workers are joined)
//   Calls still queued are dropped (their tasks are destroyed with the other unfinished
//   tasks, and their handles throw eddy::RuntimeStopped); close() waits up to
//   blocking_shutdown_timeout for the running ones, then reports how many are left running
//   (a line on stderr, and RuntimeMetrics::blocking_left_running). A call that ends after
//   close() resumes nothing. The threads hold the pool's state (shared_ptr), never the
//   scheduler, so one left running may outlive the Runtime: it ends its call, frees the job
//   and exits.
//
// Everything is under one mutex: these are threads that block anyway, not a hot path.
//
// # Runtime::current() on a blocking thread
//   Each thread knows its pool's state (a thread_local), and the state the Runtime that owns
//   the pool, until close(): a call that asks for its runtime then gets RuntimeStopped,
//   because once close() has waited blocking_shutdown_timeout the Runtime may be destroyed
//   under a call still running. The answer is read under the lock, and close() takes the
//   lock before the Runtime can go, so the reference is good when it is returned; a call
//   that keeps it past its runtime's shutdown is on its own, as with any Runtime&.
#pragma once

#include "private.hpp"

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <eddy/runtime/config.hpp>
#include <eddy/runtime/detail/blocking_job.hpp>

namespace eddy {
class Runtime;
}

namespace eddy::detail {

class Scheduler;

/// The pool's figures for RuntimeMetrics.
struct BlockingFigures {
    std::size_t threads = 0, idle = 0, queued = 0;
    std::uint64_t calls = 0, left_running = 0;
};

class BlockingPool {
public:
    explicit BlockingPool(const RuntimeConfig& config);
    ~BlockingPool();  // close()s if nobody did
    BlockingPool(const BlockingPool&) = delete;
    BlockingPool& operator=(const BlockingPool&) = delete;

    /// Queues `job` (taking the pool's reference) and starts a thread if none is idle and the
    /// limit allows. RuntimeStopped once closed; std::system_error if no thread is alive and
    /// none can start (then nothing was taken).
    void submit(BlockingJob& job);
    /// Shutdown (see above): returns the calls left running.
    std::size_t close() noexcept;
    BlockingFigures figures() const;
    /// The Runtime its threads report to Runtime::current() (before the first submit()).
    void set_runtime(Runtime* owner) noexcept;
    /// On one of a pool's threads: that pool's Runtime (eddy::RuntimeStopped naming `what`
    /// once the pool is closed). Off them: nullptr.
    static Runtime* current_runtime(const char* what);
    /// Calls queued or running (a virtual clock waits for none: runtime/clock.hpp). After
    /// it reads 0, whatever the last call resumed is queued (schedule_on runs under the lock).
    std::size_t busy() const;

private:
    struct State;
    static void thread_main(std::shared_ptr<State> s) noexcept;
    // The pool of the calling thread, if it is one of a pool's (kept alive by its thread).
    static thread_local State* t_state_;
    std::shared_ptr<State> state_;
};

}  // namespace eddy::detail
