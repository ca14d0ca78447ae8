// eddy/runtime/detail/when_any_state.hpp: what a finished when_any child means. Not for users.
//
// The first child to finish (with a value or an exception) wins a CAS on `winner_` and stops
// the when_any's own cancellation, so its siblings are cancelled; the parent resumes once
// every child has finished (the countdown of children.hpp) and takes the winner's result.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <optional>
#include <vector>

#include <eddy/runtime/detail/children.hpp>

namespace eddy::detail {

class WhenAnyState {
public:
    static constexpr std::size_t kNone = ~std::size_t{0};

    explicit WhenAnyState(std::size_t children) : countdown_(children), slots_(children) {}

    /// Before any child is prepared: `parent` is the awaiter's cancellation, `parent_frame`
    /// its frame (eddy_frame_of).
    void link(const TaskCancellation* parent, void* parent_frame) {
        stop_.emplace(parent);
        parent_frame_ = parent_frame;
    }
    /// Routes child `i`'s completion here and runs it under the combinator's cancellation.
    void prepare_child(std::size_t i, PromiseBase& p) noexcept {
        slots_[i] = Slot{FinishHook{&on_child_done, &slots_[i], parent_frame_}, this, i};
        p.set_finish(&slots_[i].hook);
        p.set_cancellation(stop_->token());
    }
    bool arrive_parent(std::coroutine_handle<> parent) noexcept { return countdown_.arrive_parent(parent); }

    /// The index of the first child to finish. Read after every child finished: the
    /// countdown's acq_rel chain orders it after the winning CAS.
    std::size_t winner() const noexcept { return winner_.load(std::memory_order_relaxed); }

private:
    struct Slot {
        FinishHook hook{};
        WhenAnyState* state = nullptr;
        std::size_t index = 0;
    };

    static std::coroutine_handle<> on_child_done(void* ctx, PromiseBase&, std::coroutine_handle<>) noexcept {
        const Slot& slot = *static_cast<Slot*>(ctx);
        WhenAnyState* self = slot.state;
        std::size_t none = kNone;
        // Relaxed: the winner is published to the parent by the countdown's acq_rel decrement.
        if (self->winner_.compare_exchange_strong(none, slot.index, std::memory_order_relaxed))
            self->stop_->request_stop();         // the losers are cancelled; they still count down
        return self->countdown_.arrive_child();  // SAFETY: the last touch of `self`
    }

    Countdown countdown_;
    std::atomic<std::size_t> winner_{kNone};
    std::vector<Slot> slots_;               // each child's hook context
    void* parent_frame_ = nullptr;          // set by link()
    std::optional<LinkedStopSource> stop_;  // set by link(), before any child starts
};

}  // namespace eddy::detail
