//! eddy/runtime/join_handle.hpp: JoinHandle<T>, the owner's view of a spawned task.
//!
//! `co_await std::move(handle)` (or `co_await handle`) suspends until the task finishes, then
//! gives its result or rethrows its exception; awaiting consumes the handle. Within one
//! runtime the awaiter resumes on the worker that finished the task (a symmetric transfer).
//! A task of another runtime may await it too: it resumes on its own runtime, and either
//! runtime may shut down or be destroyed meanwhile (the joiner then gets RuntimeStopped if
//! the task was destroyed unfinished, or is destroyed with its own runtime; see "Joins
//! across runtimes" in eddy/tasks/detail/frame_header.hpp). `is_finished()` never blocks.
//!
//! Dropping the handle (or `detach()`) detaches the task: it still runs to completion, and an
//! exception escaping it goes to the runtime's `on_unhandled_exception` hook. A finished task
//! whose handle is dropped without being awaited reports its exception the same way, so an
//! exception is never lost silently.
//!
//! Aborting (eddy/runtime/abort_handle.hpp): `abort()` and `abort_handle()` work on the
//! handle of a task spawned abortable (eddy::spawn_abortable, Runtime::spawn_abortable,
//! JoinSet); awaiting an aborted task throws eddy::TaskAborted. On any other handle they
//! throw eddy::NotAbortable; `abortable()` tells which.
//!
//! Errors: awaiting an empty handle (default-constructed, moved-from, already awaited) throws
//! eddy::BrokenTask; awaiting off a worker thread throws eddy::WrongThread; a task destroyed
//! by shutdown before it finished makes the await throw eddy::RuntimeStopped.
//!
//! A JoinHandle may outlive its Runtime (awaiting it then throws RuntimeStopped if the task
//! never finished), but must not be dropped concurrently with the Runtime's destruction.
//! @file
#pragma once

#include <coroutine>
#include <string>
#include <string_view>
#include <utility>

#include <eddy/runtime/abort_handle.hpp>
#include <eddy/runtime/detail/coop_budget.hpp>
#include <eddy/runtime/detail/scheduler_api.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy {

class Runtime;

template <class T>
/// The owner's view of a spawned task (eddy::spawn, Runtime::spawn): await it for the
/// task's result, or drop it to let the task run on detached (see the file comment).
class JoinHandle {
public:
    JoinHandle() noexcept = default;
    /// Moves the handle; `other` is left empty.
    JoinHandle(JoinHandle&& other) noexcept : header_(std::exchange(other.header_, nullptr)) {}
    /// Detaches the task this handle owned (as dropping it would), then takes `other`'s.
    JoinHandle& operator=(JoinHandle&& other) noexcept {
        if (this != &other) {
            release(false);
            header_ = std::exchange(other.header_, nullptr);
        }
        return *this;
    }
    JoinHandle(const JoinHandle&) = delete;
    JoinHandle& operator=(const JoinHandle&) = delete;
    ~JoinHandle() { release(false); }

    /// True while the handle owns a task: not default-constructed, moved-from or awaited.
    bool valid() const noexcept { return header_ != nullptr; }

    /// True once the task has finished (or was cancelled by shutdown). Never blocks.
    bool is_finished() const noexcept {
        // Acquire: pairs with the completer's acq_rel fetch_or of kComplete.
        return header_ != nullptr &&
               (header_->state.load(std::memory_order_acquire) & detail::FrameHeader::kComplete) != 0;
    }

    /// True when the task was spawned abortable.
    bool abortable() const noexcept { return header_ != nullptr && detail::abort_state_of(header_) != nullptr; }

    /// Aborts the task (eddy/runtime/abort_handle.hpp): a no-op once it has finished.
    /// Throws eddy::NotAbortable unless it was spawned abortable, BrokenTask on an empty handle.
    void abort() const { abort_state("abort")->abort(); }

    /// A copyable handle that can abort the task from anywhere, also after this JoinHandle
    /// is gone. Throws like abort().
    AbortHandle abort_handle() const { return AbortHandle(abort_state("abort_handle")); }

    /// Lets the task run on without an owner (the same as dropping the handle).
    void detach() noexcept { release(false); }

    /// What `co_await handle` awaits.
    class Awaiter {
    public:
        /// Throws eddy::BrokenTask on an empty handle.
        explicit Awaiter(JoinHandle& h) : handle_(h) {
            if (handle_.header_ == nullptr)
                throw BrokenTask(
                    "eddy: awaiting an empty JoinHandle (moved-from, "
                    "default-constructed or already awaited)");
        }
        /// Destroyed while it waits for a task of another runtime (this runtime's shutdown
        /// destroys the frame): see "Joins across runtimes" in frame_header.hpp.
        ~Awaiter() {
            if (cross_) detail::join_withdraw(handle_.header_);
        }
        bool await_ready() const noexcept { return false; }
        template <class P>
        bool await_suspend(std::coroutine_handle<P> awaiter) {
            // A finished task's result is an operation that completed at once: it spends
            // budget (eddy/runtime/coop.hpp).
            if (handle_.is_finished()) return detail::coop_yield(awaiter);
            // SAFETY: after join_suspend publishes `awaiter`, the completer may resume it on
            // another thread at once; nothing of this awaiter is touched afterwards.
            return detail::join_suspend(handle_.header_, awaiter, &cross_) || detail::coop_yield(awaiter);
        }
        T await_resume() {
            if (cross_) {
                cross_ = false;
                detail::join_settle(handle_.header_);
            }
            return handle_.take();
        }
        void dump_wait(detail::DumpWait& d) const { d.join(handle_.header_); }

    private:
        JoinHandle& handle_;
        bool cross_ = false;  // waits for a task of another runtime (set by join_suspend)
    };
    /// `co_await handle` (or `co_await std::move(handle)`): the task's result, or its exception
    /// rethrown; consumes the handle either way.
    /// @{
    Awaiter operator co_await() & { return Awaiter(*this); }
    Awaiter operator co_await() && { return Awaiter(*this); }
    /// @}

private:
    friend class Runtime;
    template <class U>
    friend JoinHandle<U> spawn(Task<U> task);
    template <class U>
    friend JoinHandle<U> spawn(Task<U> task, std::string_view name);
    template <class U>
    friend JoinHandle<U> spawn_abortable(Task<U> task);
    using Promise = detail::Promise<T>;

    explicit JoinHandle(detail::FrameHeader* h) noexcept : header_(h) {}

    Promise* promise() const noexcept {
        return &std::coroutine_handle<Promise>::from_address(header_->frame()).promise();
    }

    /// Called once the task is known to be complete: the result, consumed.
    T take() {
        struct Consume {
            JoinHandle& h;
            ~Consume() { h.release(true); }
        } consume{*this};
        if (header_->state.load(std::memory_order_acquire) & detail::FrameHeader::kCancelled) detail::throw_cancelled();
        if (const detail::AbortState* a = detail::abort_state_of(header_);
            a != nullptr && a->aborted() && promise()->exception())
            throw TaskAborted("eddy: the task was aborted before it finished");
        return promise()->take();
    }

    detail::AbortState* abort_state(const char* what) const {
        if (header_ == nullptr) throw BrokenTask(std::string("eddy::JoinHandle::") + what + ": the handle is empty");
        detail::AbortState* a = detail::abort_state_of(header_);
        if (a == nullptr)
            throw NotAbortable(std::string("eddy::JoinHandle::") + what +
                               ": the task was not spawned abortable (use eddy::spawn_abortable)");
        return a;
    }

    /// Blocks the calling (non-worker) thread until the task finishes; for Runtime::block_on.
    T wait() {
        detail::join_wait(header_);
        return take();
    }

    void release(bool consumed) noexcept {
        if (header_ != nullptr) {
            detail::FrameHeader* h = std::exchange(header_, nullptr);
            detail::join_release(h, &std::coroutine_handle<Promise>::from_address(h->frame()).promise(), consumed);
        }
    }

    detail::FrameHeader* header_ = nullptr;
};

}  // namespace eddy
