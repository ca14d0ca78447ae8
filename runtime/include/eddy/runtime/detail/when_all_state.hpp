// eddy/runtime/detail/when_all_state.hpp: the countdown that resumes a when_all's parent.
//
// Protocol, in order:
//   1. The parent sets every child's completion hook to on_child_done (the hook runs in the
//      child's final suspend) and queues the children on its worker's deque.
//   2. The count starts at children + 1. The extra one is the parent's own: while the parent
//      is still queuing children (and so still reading its own frame), no child can take
//      the count to zero and resume it. Nothing may touch the parent after a child is
//      queued otherwise, since idle workers steal and finish children immediately.
//   3. The parent then arrives itself. If it took the count to zero, every child finished
//      already and it continues without suspending; otherwise the child that takes the count
//      to zero resumes the parent by symmetric transfer, on that child's worker.
// A failing child's exception is kept if it is the first (in time); the parent rethrows it
// after all children finished. No child is ever left running.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <exception>

#include <eddy/runtime/detail/scheduler_api.hpp>
#include <eddy/tasks/detail/promise.hpp>

namespace eddy::detail {

class WhenAllState {
public:
    explicit WhenAllState(std::size_t children) noexcept : remaining_(children + 1) {}

    /// Step 1 for one child: route its completion here and queue it on this worker.
    void start_child(PromiseBase& p, std::coroutine_handle<> child) noexcept {
        p.set_finish(&on_child_done, this);
        schedule_local(child);
    }

    /// Step 3: true when the parent must suspend. Touches nothing of `this` after the
    /// decrement unless it was the last arrival.
    bool arrive_parent(std::coroutine_handle<> parent) noexcept {
        parent_ = parent;  // published to the last child by the acq_rel decrement below
        // Acq_rel: release publishes parent_; acquire (when last) sees every child's result.
        return remaining_.fetch_sub(1, std::memory_order_acq_rel) != 1;
    }

    void rethrow_if_failed() const {
        // Read after the count reached zero: the acq_rel chain on remaining_ orders it after
        // the write by the CAS winner in on_child_done.
        if (first_error_) std::rethrow_exception(first_error_);
    }

private:
    static std::coroutine_handle<> on_child_done(void* ctx, PromiseBase& p,
                                                 std::coroutine_handle<>) noexcept {
        auto* self = static_cast<WhenAllState*>(ctx);
        if (p.exception()) {
            bool expected = false;
            // Relaxed suffices: first_error_ is published by the acq_rel decrement below.
            if (self->failed_.compare_exchange_strong(expected, true, std::memory_order_relaxed))
                self->first_error_ = p.exception();
        }
        // Acq_rel: release publishes this child's result; acquire (when last) sees the
        // others' results and parent_.
        if (self->remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) return self->parent_;
        return std::noop_coroutine();  // SAFETY: not last: `self` may be gone already
    }

    std::atomic<std::size_t> remaining_;
    std::atomic<bool> failed_{false};
    std::exception_ptr first_error_;  // written once, by the failed_ CAS winner
    std::coroutine_handle<> parent_;
};

/// Awaits children given by `get(i)` -> std::pair<PromiseBase*, std::coroutine_handle<>>.
template <class GetChild>
class WhenAllAwaiter {
public:
    WhenAllAwaiter(std::size_t n, GetChild get) : n_(n), get_(get), state_(n) {}

    bool await_ready() const {
        if (n_ == 0) return true;
        require_worker("eddy::when_all");
        return false;
    }
    bool await_suspend(std::coroutine_handle<> parent) noexcept {
        for (std::size_t i = 0; i < n_; ++i) {
            auto [promise, child] = get_(i);
            state_.start_child(*promise, child);
        }
        notify_local_work();
        return state_.arrive_parent(parent);
    }
    void await_resume() const { state_.rethrow_if_failed(); }

private:
    std::size_t n_;
    GetChild get_;
    WhenAllState state_;
};

} // namespace eddy::detail
