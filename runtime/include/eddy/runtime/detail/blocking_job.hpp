// eddy/runtime/detail/blocking_job.hpp: one call of eddy::spawn_blocking as the blocking pool
// and the awaiting task share it. Not for users: no stability promise.
//
// # Who holds what
//   The job is on the heap, never in the task's frame: the closure may still be running on a
//   blocking thread when runtime shutdown destroys the frame. Two references: the task's
//   (released when its frame goes) and the pool's (released once the call has run, or was
//   dropped unstarted at shutdown). The last one frees it.
//
// # Waking the task (state_)
//   kPending --(the task awaits: waiter_ set)--> kWaiting --(done)--> the pool schedules it
//   kPending --(done first)--> kDone: the task's await does not suspend
//   One exchange on each side decides; acq_rel, so the result written by the blocking thread
//   is visible to the task, and the waiter written by the task to the blocking thread.
//   After runtime shutdown has closed the pool, a call that ends schedules nothing: its
//   frame is gone or about to be.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

namespace eddy::detail {

class Scheduler;

class BlockingJob {
public:
    BlockingJob() noexcept = default;
    BlockingJob(const BlockingJob&) = delete;
    BlockingJob& operator=(const BlockingJob&) = delete;

    /// The blocking thread: runs the call; its exception is kept for the task.
    virtual void run() noexcept = 0;

    /// Drops a reference; the last frees the job.
    void release() noexcept {
        // Acq_rel: the last holder sees the other's writes before deleting.
        if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
    }

    /// The task, in await_suspend: true if it must suspend (the pool resumes `h` on `sched`
    /// once the call has run); false if the call has run already.
    bool wait(std::coroutine_handle<> h, Scheduler* sched) noexcept {
        waiter_ = h;
        sched_ = sched;
        // Acq_rel: release publishes waiter_/sched_ to finish(); acquire (kDone) the result.
        return state_.exchange(kWaiting, std::memory_order_acq_rel) != kDone;
    }
    /// The pool, after run(): the task to resume, if it waits already (else it will see
    /// kDone when it awaits).
    std::coroutine_handle<> finish(Scheduler*& sched) noexcept {
        // Acq_rel: release publishes the result to wait(); acquire sees waiter_/sched_.
        if (state_.exchange(kDone, std::memory_order_acq_rel) != kWaiting) return {};
        sched = sched_;
        return waiter_;
    }

protected:
    virtual ~BlockingJob() = default;
    std::exception_ptr error_;

private:
    static constexpr std::uint8_t kPending = 0, kWaiting = 1, kDone = 2;
    std::atomic<std::uint8_t> state_{kPending};
    std::atomic<std::uint32_t> refs_{2};  // the task's and the pool's
    std::coroutine_handle<> waiter_{};
    Scheduler* sched_ = nullptr;
};

/// A job that calls `F` and keeps its result `R` (or exception).
template <class R, class F>
class BlockingCallJob final : public BlockingJob {
public:
    explicit BlockingCallJob(F&& f) : f_(std::move(f)) {}
    explicit BlockingCallJob(const F& f) : f_(f) {}

    void run() noexcept override {
        try {
            if constexpr (std::is_void_v<R>) {
                f_();
            } else {
                value_.emplace(f_());
            }
        } catch (...) {
            error_ = std::current_exception();
        }
    }
    /// The task, once the call has run: the result, or its exception rethrown.
    R take() {
        // Moved out: the task's thread then holds the exception alone, so the job's release
        // on the blocking thread never drops the last reference of an exception the task is
        // still handling (exception_ptr's count lives in uninstrumented libstdc++: TSan could
        // not see it order the two).
        if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
        if constexpr (!std::is_void_v<R>) return std::move(*value_);
    }

private:
    F f_;
    struct Empty {};
    std::optional<std::conditional_t<std::is_void_v<R>, Empty, R>> value_;
};

/// Hands `job` to the blocking pool of `sched` (`what` names the caller in the errors:
/// eddy::WrongThread for a null `sched` (not on a worker), eddy::RuntimeStopped once the
/// runtime is shut down, std::system_error when no blocking thread can be started). The pool
/// takes its reference only on success.
void submit_blocking(Scheduler* sched, BlockingJob& job, const char* what);

}  // namespace eddy::detail
