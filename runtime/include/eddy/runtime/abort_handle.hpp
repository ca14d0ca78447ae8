//! eddy/runtime/abort_handle.hpp: aborting a spawned task from outside it.
//!
//!     eddy::JoinHandle<void> h = eddy::spawn_abortable(serve(std::move(conn)));
//!     eddy::AbortHandle stop = h.abort_handle();   // copyable; may outlive the task
//!     ...
//!     stop.abort();                                // from any thread
//!     co_await std::move(h);                       // throws eddy::TaskAborted
//!
//! What abort does: the task's cancellation (eddy/tasks/cancellation.hpp) is requested, so
//! whatever it is suspended on now, or suspends on next, throws eddy::OperationCancelled
//! (after the operation let go of its buffer, as for any cancellation), and the task unwinds.
//! Computation is not interrupted: a long loop reaches `this_task::check_cancelled()`.
//! The handle then reports the task as aborted: awaiting it throws eddy::TaskAborted if the
//! task ended by an exception, and gives the value if it returned anyway (it reached no
//! cancellation point). Aborting a task that has finished is a no-op (its result stands);
//! aborting twice is the same as once. A detached aborted task's exception is not reported to
//! `on_unhandled_exception`: its owner asked for it to stop.
//!
//! Why opt-in (spawn_abortable, not every spawn): a task that can be aborted must register
//! its cancellation at every wait (a StopCallback: a few atomic operations), and owns
//! one more allocation (this state). Plain `eddy::spawn` tasks skip both; they remain
//! uncancellable, as before. JoinSet spawns abortable tasks.
//!
//! Who may call what: AbortHandle::abort() from any thread, any time (also after the task and
//! its runtime are gone: then it does nothing).
//! @file
#pragma once

#include <cassert>
#include <atomic>
#include <coroutine>
#include <cstdint>
#include <utility>

#include <eddy/tasks/detail/frame_header.hpp>
#include <eddy/tasks/detail/promise.hpp>

namespace eddy {

namespace detail {

/// An abortable task's cancellation, shared (reference-counted) by its frame header, its
/// JoinHandle's abort_handle()s and JoinSet entries.
class AbortState final : public FrameExtra {
public:
    static AbortState* make() { return new AbortState(); }

    /// The task's cancellation scope: its promise points here.
    const TaskCancellation* scope() const noexcept { return &scope_; }

    /// Requests the abort unless the task has finished. Any thread.
    void abort() noexcept {
        std::uint8_t expected = kRunning;
        // Acq_rel: pairs with finish()'s CAS; exactly one of the two wins.
        if (phase_.compare_exchange_strong(expected, kAborted, std::memory_order_acq_rel))
            stop_.request_stop();  // runs the task's registered cancellations
    }
    /// The task reached its final suspend (finish_root). False: it was aborted first.
    bool finish() noexcept {
        std::uint8_t expected = kRunning;
        return phase_.compare_exchange_strong(expected, kFinished, std::memory_order_acq_rel);
    }
    /// True when abort() came before the task finished. Acquire: pairs with the CASes.
    bool aborted() const noexcept { return phase_.load(std::memory_order_acquire) == kAborted; }

private:
    static constexpr std::uint8_t kRunning = 0;
    static constexpr std::uint8_t kFinished = 1;
    static constexpr std::uint8_t kAborted = 2;

    AbortState() noexcept : scope_(&stop_) {
        destroy = &free;
        abortable = true;
    }
    static void free(FrameExtra* self) noexcept { delete static_cast<AbortState*>(self); }

    StopState stop_;
    TaskCancellation scope_;
    std::atomic<std::uint8_t> phase_{kRunning};
};

/// Gives the unstarted root task `frame` an abort state (its header owns the reference; a
/// name given before moves into it) and runs it under that state's cancellation. On
/// allocation failure the frame is destroyed.
inline void make_abortable(PromiseBase& p, std::coroutine_handle<> frame) {
    AbortState* a = nullptr;
    try {
        a = AbortState::make();
    } catch (...) {
        frame.destroy();
        throw;
    }
    FrameHeader* h = header_of(frame.address());
    if (h->extra != nullptr) {  // a name given first (name_task): the abort state takes it over
        assert(!h->extra->abortable && "a task is made abortable once");
        a->name = std::move(h->extra->name);
        h->extra->release();  // unpublished: ours is the only reference
    }
    h->extra = a;  // published with the frame by the spawn
    p.set_cancellation(a->scope());
}

/// The abort state of the task behind `h`, or nullptr (not abortable).
inline AbortState* abort_state_of(FrameHeader* h) noexcept {
    return h->extra != nullptr && h->extra->abortable ? static_cast<AbortState*>(h->extra) : nullptr;
}

}  // namespace detail

/// A copyable right to abort one task; see above. Default-constructed: aborts nothing.
class AbortHandle {
public:
    AbortHandle() noexcept = default;
    /// Copies share the task: any of them can abort it.
    AbortHandle(const AbortHandle& o) noexcept : state_(o.state_) {
        if (state_ != nullptr) state_->retain();
    }
    /// Moves the handle; `o` is left empty.
    AbortHandle(AbortHandle&& o) noexcept : state_(std::exchange(o.state_, nullptr)) {}
    /// Lets go of this handle's task and takes `o`'s.
    AbortHandle& operator=(AbortHandle o) noexcept {
        std::swap(state_, o.state_);
        return *this;
    }
    ~AbortHandle() {
        if (state_ != nullptr) state_->release();
    }

    /// Aborts the task (see above). Any thread; a no-op once it has finished.
    void abort() const noexcept {
        if (state_ != nullptr) state_->abort();
    }
    /// True when abort() reached the task before it finished.
    bool aborted() const noexcept { return state_ != nullptr && state_->aborted(); }
    /// False for a default-constructed or moved-from handle (whose abort() does nothing).
    bool valid() const noexcept { return state_ != nullptr; }

private:
    template <class T>
    friend class JoinHandle;
    template <class T>
    friend class JoinSet;
    explicit AbortHandle(detail::AbortState* s) noexcept : state_(s) { state_->retain(); }
    detail::AbortState* state_of() const noexcept { return state_; }

    detail::AbortState* state_ = nullptr;
};

}  // namespace eddy
