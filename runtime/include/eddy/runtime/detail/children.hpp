// eddy/runtime/detail/children.hpp: starting a combinator's children on the workers and
// awaiting them (when_all, when_any). Not for users.
//
// Protocol, in order (ChildrenAwaiter::await_suspend):
//   1. The combinator's own cancellation is linked under its awaiter's (State::link), so
//      cancelling the awaiter cancels every child.
//   2. Every child's completion hook and cancellation are set (State::prepare_child); the
//      children after the first are queued on this worker's deque, where idle workers steal
//      them, so they run in parallel.
//   3. The count starts at children + 1. The extra one is the parent's own: while the parent
//      is still queuing children (and so still reading its own frame), no child can take
//      the count to zero and resume it.
//   4. The parent then arrives itself; it is never the last, since the first child has not
//      run yet. It transfers to the first child (symmetric transfer, as `co_await task`
//      does: no queue round trip, the child starts on a warm core). The child that takes
//      the count to zero resumes the parent by symmetric transfer, on that child's worker.
// No child is ever left running: the parent resumes only after every child's frame reached
// its final suspend.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include <eddy/runtime/detail/scheduler_api.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::detail {

/// What a child contributes to a tuple or variant: std::monostate for void.
template <class T>
struct ChildValue {
    using type = T;
};
template <>
struct ChildValue<void> {
    using type = std::monostate;
};
template <class T>
using child_value_t = typename ChildValue<T>::type;

/// A child's promise and coroutine; BrokenTask for an empty task, naming the combinator.
template <class T>
std::pair<PromiseBase*, std::coroutine_handle<>> child_of(const Task<T>& t, const char* what) {
    auto h = TaskAccess::get(t);
    if (!h) throw BrokenTask(std::string(what) + ": a child task is empty (moved-from or already awaited)");
    return {&h.promise(), h};
}

/// A finished child's result (or its exception, rethrown).
template <class T>
child_value_t<T> take_child(Task<T>& t) {
    if constexpr (std::is_void_v<T>) {
        TaskAccess::get(t).promise().take();
        return {};
    } else {
        return TaskAccess::get(t).promise().take();
    }
}

/// The countdown both combinators share (steps 3 and 4 of the protocol above).
class Countdown {
public:
    explicit Countdown(std::size_t children) noexcept : remaining_(children + 1) {}

    /// Step 4: true when the parent must suspend. Touches nothing of `this` after the
    /// decrement unless it was the last arrival.
    bool arrive_parent(std::coroutine_handle<> parent) noexcept {
        parent_ = parent;  // published to the last child by the acq_rel decrement below
        // Acq_rel: release publishes parent_; acquire (when last) sees every child's result.
        return remaining_.fetch_sub(1, std::memory_order_acq_rel) != 1;
    }

    /// A child's arrival, from its completion hook: the parent to transfer to when it was the
    /// last, else a no-op. SAFETY: when not last, the state may be gone as soon as this
    /// returns (the parent may already run): the caller touches nothing afterwards.
    std::coroutine_handle<> arrive_child() noexcept {
        // Acq_rel: release publishes this child's result; acquire (when last) sees the
        // others' results and parent_.
        if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) return parent_;
        return std::noop_coroutine();
    }

private:
    std::atomic<std::size_t> remaining_;
    std::coroutine_handle<> parent_;
};

/// Awaits `n` children given by `get(i)` -> std::pair<PromiseBase*, std::coroutine_handle<>>,
/// with `State` (WhenAllState, WhenAnyState) deciding what a finished child means.
/// `co_await` gives the State, for the combinator to read its outcome.
template <class State, class GetChild>
class ChildrenAwaiter {
public:
    ChildrenAwaiter(const char* what, std::size_t n, GetChild get) : what_(what), n_(n), get_(get), state_(n) {}

    bool await_ready() const {
        if (n_ == 0) return true;
        require_worker(what_);
        return false;
    }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> parent) {
        state_.link(cancellation_scope_of(parent), eddy_frame_of(parent));
        // Child 0 runs next on this worker, by symmetric transfer (as an awaited task does);
        // the others go to this worker's deque, where idle workers steal them.
        const auto [first_promise, first] = get_(0);
        state_.prepare_child(0, *first_promise);
        for (std::size_t i = 1; i < n_; ++i) {
            auto [promise, child] = get_(i);
            state_.prepare_child(i, *promise);
            schedule_local(child);
        }
        if (n_ > 1) notify_local_work();
        // Never the last arrival: child 0 has not run yet. SAFETY: from here on a finishing
        // child may resume the parent on another worker only after child 0 finished, which
        // cannot happen before we transfer to it; nothing of `this` is touched below.
        (void)state_.arrive_parent(parent);
        return first;
    }
    State& await_resume() noexcept { return state_; }
    /// Task dumps: "when_all of 3", the children under it.
    void dump_wait(DumpWait& d) const {
        std::string_view what(what_);
        if (what.starts_with("eddy::")) what.remove_prefix(6);
        d.text(what);
        d.text(" of ");
        d.number(static_cast<std::int64_t>(n_));
        for (std::size_t i = 0; i < n_; ++i) d.child(get_(i).second);
    }

private:
    const char* what_;
    std::size_t n_;
    GetChild get_;
    State state_;
};

/// True when `e` holds an eddy::OperationCancelled (the mark of a child that was stopped).
inline bool is_cancellation(const std::exception_ptr& e) noexcept {
    try {
        std::rethrow_exception(e);
    } catch (const OperationCancelled&) {
        return true;
    } catch (...) {
        return false;
    }
}

}  // namespace eddy::detail
