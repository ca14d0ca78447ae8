// eddy/runtime/detail/when_all_state.hpp: what a finished when_all child means. Not for users.
//
// The children run under the when_all's own cancellation, linked under its awaiter's. The
// first child to throw (in time) keeps its exception and stops that cancellation, so the
// siblings still waiting on I/O, timers or synchronization are cancelled instead of being
// waited for; the parent rethrows that first exception once every child has finished (the
// siblings' OperationCancelled are discarded). Protocol of the countdown: children.hpp.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <optional>

#include <eddy/runtime/detail/children.hpp>

namespace eddy::detail {

class WhenAllState {
public:
    explicit WhenAllState(std::size_t children) noexcept : countdown_(children) {}

    /// Before any child is prepared or started (the state has its final address by then):
    /// `parent` is the awaiter's cancellation, `parent_frame` its frame (eddy_frame_of).
    void link(const TaskCancellation* parent, void* parent_frame) {
        stop_.emplace(parent);
        // Written once here: a child started earlier reads it when it finishes, possibly on
        // another worker while later children are being prepared.
        hook_ = FinishHook{&on_child_done, this, parent_frame};
    }
    /// Routes child `i`'s completion here and runs it under the combinator's cancellation.
    void prepare_child(std::size_t, PromiseBase& p) noexcept {
        p.set_finish(&hook_);
        p.set_cancellation(stop_->token());
    }
    bool arrive_parent(std::coroutine_handle<> parent) noexcept { return countdown_.arrive_parent(parent); }

    void rethrow_if_failed() const {
        // Read after the count reached zero: the acq_rel chain of the countdown orders it
        // after the write by the CAS winner in on_child_done.
        if (first_error_) std::rethrow_exception(first_error_);
    }

private:
    static std::coroutine_handle<> on_child_done(void* ctx, PromiseBase& p, std::coroutine_handle<>) noexcept {
        auto* self = static_cast<WhenAllState*>(ctx);
        if (p.exception()) {
            bool expected = false;
            // Relaxed suffices: first_error_ is published by the countdown's acq_rel decrement.
            if (self->failed_.compare_exchange_strong(expected, true, std::memory_order_relaxed)) {
                self->first_error_ = p.exception();
                self->stop_->request_stop();  // cancel the siblings; they still count down
            }
        }
        return self->countdown_.arrive_child();  // SAFETY: the last touch of `self`
    }

    FinishHook hook_{};  // every child's completion: on_child_done(this)
    Countdown countdown_;
    std::atomic<bool> failed_{false};
    std::exception_ptr first_error_;        // written once, by the failed_ CAS winner
    std::optional<LinkedStopSource> stop_;  // set by link(), before any child starts
};

}  // namespace eddy::detail
