//! eddy/runtime/spawn_blocking.hpp: eddy::spawn_blocking, running a blocking call on the
//! runtime's blocking threads instead of a worker (Tokio's spawn_blocking).
//!
//!     eddy::JoinHandle<std::string> h = eddy::spawn_blocking([path] { return slurp(path); });
//!     std::string text = co_await std::move(h);            // rethrows what the call threw
//!     auto h2 = rt.spawn_blocking([] { return getaddrinfo_sync("example.org"); });  // any thread
//!
//! The call starts on a blocking thread at once (a thread is started if none is idle and
//! fewer than RuntimeConfig::max_blocking_threads are alive; else it waits in a FIFO queue).
//! The handle is an ordinary JoinHandle: await it, drop it (the call still runs, and an
//! exception it throws goes to the unhandled-exception policy), or check is_finished(). The
//! call is not cancellable, and awaiting its handle is not a cancellation point (as for any
//! JoinHandle): the call runs to its end. At runtime shutdown, calls not started are dropped (their handles throw
//! eddy::RuntimeStopped) and running ones are waited for up to blocking_shutdown_timeout
//! (eddy/runtime/config.hpp); one still running then finishes on its own thread, so the
//! callable must not refer to what shutdown destroys (the awaiting task's locals): capture by
//! value.
//!
//! Errors: eddy::WrongThread from eddy::spawn_blocking off a worker thread (use
//! Runtime::spawn_blocking there), eddy::RuntimeStopped once the runtime is shut down,
//! std::system_error when no blocking thread can be started and none is alive.
//! @file
#pragma once

#include <functional>
#include <type_traits>
#include <utility>

#include <eddy/runtime/detail/blocking_job.hpp>
#include <eddy/runtime/detail/scheduler_api.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy {

namespace detail {

/// The task's reference to its job (released with the task's frame).
template <class R, class F>
class BlockingJobRef {
public:
    explicit BlockingJobRef(BlockingCallJob<R, F>* job) noexcept : job_(job) {}
    BlockingJobRef(BlockingJobRef&& other) noexcept : job_(std::exchange(other.job_, nullptr)) {}
    BlockingJobRef& operator=(BlockingJobRef&&) = delete;
    ~BlockingJobRef() {
        if (job_ != nullptr) job_->release();
    }
    BlockingCallJob<R, F>* get() const noexcept { return job_; }

private:
    BlockingCallJob<R, F>* job_;
};

/// Suspends until the job has run (unless it has already), then gives its result.
template <class R, class F>
class BlockingAwaiter {
public:
    explicit BlockingAwaiter(BlockingCallJob<R, F>* job) noexcept : job_(job) {}
    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<> h) {
        // SAFETY: once wait() has published `h`, the blocking thread may resume it at once.
        return job_->wait(h, &require_worker("co_await on eddy::spawn_blocking"));
    }
    R await_resume() { return job_->take(); }
    void dump_wait(DumpWait& d) const { d.text("spawn_blocking call"); }

private:
    BlockingCallJob<R, F>* job_;
};

template <class R, class F>
Task<R> await_blocking(BlockingJobRef<R, F> job) {
    co_return co_await BlockingAwaiter<R, F>(job.get());
}

template <class F>
auto spawn_blocking_on(Scheduler* sched, F&& f, const char* what) {
    using Fn = std::decay_t<F>;
    using R = std::invoke_result_t<Fn&>;
    static_assert(!std::is_reference_v<R>, "eddy::spawn_blocking: the callable must return a value, not a reference");
    auto* job = new BlockingCallJob<R, Fn>(std::forward<F>(f));
    Task<R> task = await_blocking(BlockingJobRef<R, Fn>(job));  // holds the task's reference
    try {
        submit_blocking(sched, *job, what);
    } catch (...) {
        job->release();  // the pool's reference, which it did not take
        throw;
    }
    return task;
}

}  // namespace detail

/// Runs `f()` (a callable taking no arguments; its result may be void or move-only) on a
/// blocking thread of the calling worker's runtime and returns its handle (see above).
template <class F>
auto spawn_blocking(F&& f) {
    return spawn(detail::spawn_blocking_on(detail::current_scheduler(), std::forward<F>(f), "eddy::spawn_blocking"));
}

}  // namespace eddy
