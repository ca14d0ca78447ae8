// eddy/tasks/detail/task_cancellation.hpp: the scope a task runs under (its cancellation and
// what else it inherits from whoever awaits it), and the lazily linked stop source of a
// combinator. Not for users.
#pragma once

#include <atomic>
#include <cstdint>
#include <stop_token>
#include <thread>

#include <eddy/tasks/detail/stop_state.hpp>

namespace eddy::detail {

class LinkedStopSource;

/// The task-local values a scope carries (eddy/tasks/task_local.hpp): values[slot].
struct TaskLocals {
    const void* const* values = nullptr;  // values[slot]: the bound value, or nullptr
    std::uint32_t size = 0;
    const void* get(std::uint32_t slot) const noexcept { return slot < size ? values[slot] : nullptr; }
};

/// The cancellation a task runs under: a StopState (eddy/tasks/detail/stop_state.hpp) owned
/// by whoever started the task (a combinator's state, a with_timeout, with_stop_token, an
/// abortable task's state), shared by every task it awaits; none for an uncancellable task.
///
/// A combinator's scope makes its state usable on demand (`lazy`, see LinkedStopSource):
/// get() is the state, linked to the parent's at the first call; a scope whose tasks never
/// wait on anything cancellable (a fork-join that only computes) never links anything.
///
/// The scope also carries what else a task inherits from whoever awaits it: `unconstrained`,
/// set by eddy::coop::unconstrained, exempts the tasks under it from the cooperative budget
/// (eddy/runtime/coop.hpp); `locals`, the task-local values bound above it
/// (eddy/tasks/task_local.hpp); `deadline_ns`, the deadline set by eddy::with_deadline
/// (eddy/time/with_deadline.hpp), which every I/O operation under it carries into the kernel.
/// A scope nested under another (a combinator's, a task-local binding's) inherits all three
/// with inherit().
struct TaskCancellation {
    explicit TaskCancellation(StopState* s = nullptr) noexcept : state(s) {}
    /// A scope with its parent's state (or its parent's lazy source) and everything else it
    /// inherits (nullptr: none).
    struct Derive {};
    TaskCancellation(const TaskCancellation* parent, Derive) noexcept
        : state(parent != nullptr ? parent->state : nullptr), lazy(parent != nullptr ? parent->lazy : nullptr) {
        inherit(parent);
    }
    TaskCancellation(const TaskCancellation&) = delete;
    TaskCancellation& operator=(const TaskCancellation&) = delete;

    /// The state to register a cancellation on (nullptr: none can come); linked now when
    /// this scope links on demand.
    StopState* get() const noexcept;
    /// True when a stop may come (without linking anything).
    bool stop_possible() const noexcept { return lazy != nullptr || state != nullptr; }
    /// True when a stop was requested (without linking anything).
    bool stop_requested() const noexcept;

    /// A std::stop_token for code outside the task tree (empty when no stop can come).
    std::stop_token share() const noexcept {
        StopState* s = get();
        return s != nullptr ? s->token() : std::stop_token{};
    }

    /// Takes what `parent` passes down besides its cancellation (nothing when it is null).
    void inherit(const TaskCancellation* parent) noexcept {
        unconstrained = parent != nullptr && parent->unconstrained;
        locals = parent != nullptr ? parent->locals : TaskLocals{};
        deadline_ns = parent != nullptr ? parent->deadline_ns : kNoDeadline;
    }

    /// deadline_ns of a scope without a deadline.
    static constexpr std::int64_t kNoDeadline = INT64_MAX;

    StopState* state = nullptr;  // unused when `lazy` is set
    LinkedStopSource* lazy = nullptr;
    bool unconstrained = false;              // written before any task runs under the scope
    TaskLocals locals;                       // likewise
    std::int64_t deadline_ns = kNoDeadline;  // steady_clock ns since its epoch; likewise
};

/// A combinator's own cancellation (when_all, when_any, TaskGroup, with_stop_token), stopped
/// when its parent's is, linked to the parent only when needed.
///
/// Why lazy: the link (a callback registered on the parent's state, and unregistered at the
/// end) matters only if some task under it waits on something cancellable. A fork-join of
/// pure computation (each node a when_all of two calls) never does, and would pay both at
/// every node. So the link is made by the first get() (a child about to wait registers its
/// cancellation on the state get() returns); until then stop_requested() also asks the
/// parent. Linking registers on the parent's state, which runs the forward at once if the
/// parent is stopped already, so a stop of the parent is never missed: a child that asks for
/// the state finds it stopped, or is reached through the link.
///
/// Its scope inherits the rest of `parent`'s (coop::unconstrained, the task-locals). Lives in
/// the combinator's frame, which outlives every task under it; not movable (the scope points
/// at it).
class LinkedStopSource {
public:
    explicit LinkedStopSource(const TaskCancellation* parent) noexcept : parent_(parent) {
        scope_.inherit(parent);
        scope_.lazy = this;
    }
    LinkedStopSource(const LinkedStopSource&) = delete;
    LinkedStopSource& operator=(const LinkedStopSource&) = delete;
    ~LinkedStopSource() { link_.reset(); }  // first: waits for a forward running elsewhere

    /// The cancellation children run under; stays valid as long as this object.
    const TaskCancellation* token() const noexcept { return &scope_; }

    /// The state, linked to the parent's first if needed. Any thread.
    StopState* get() noexcept {
        // Acquire: pairs with the release store that ends the linking below.
        if (phase_.load(std::memory_order_acquire) != kLinked) link();
        return &state_;
    }

    /// Stops the children (true when this call did). Any thread; allocates nothing.
    bool request_stop() noexcept { return state_.request_stop(); }

    bool stop_requested() const noexcept {
        // The phase first: once linked, a stop of the parent made before the link was
        // forwarded during linking, before the release store of kLinked this acquire pairs
        // with. Read the other way round, a poll could see the state unstopped, then the link
        // made (by another thread, forwarding the parent's stop), and skip the parent: false
        // after the parent's stop had finished.
        if (phase_.load(std::memory_order_acquire) == kLinked) return state_.stop_requested();
        return state_.stop_requested() || (parent_ != nullptr && parent_->stop_requested());
    }

private:
    static constexpr std::uint8_t kUnlinked = 0;
    static constexpr std::uint8_t kLinking = 1;
    static constexpr std::uint8_t kLinked = 2;

    void link() noexcept {
        std::uint8_t expected = kUnlinked;
        // Acquire on both outcomes: see the other linker's store of kLinked below.
        if (phase_.compare_exchange_strong(expected, kLinking, std::memory_order_acquire)) {
            if (parent_ != nullptr && parent_->stop_possible()) {
                link_.emplace(*parent_->get(), ForwardStop{&state_});  // may forward at once
            }
            phase_.store(kLinked, std::memory_order_release);  // release: pairs with get()
            return;
        }
        // Another thread links (a few instructions): wait for it.
        while (phase_.load(std::memory_order_acquire) != kLinked) std::this_thread::yield();
    }

    const TaskCancellation* parent_;
    TaskCancellation scope_;
    StopState state_;
    StopCallback<ForwardStop> link_;
    std::atomic<std::uint8_t> phase_{kUnlinked};
};

inline StopState* TaskCancellation::get() const noexcept { return lazy != nullptr ? lazy->get() : state; }

inline bool TaskCancellation::stop_requested() const noexcept {
    return lazy != nullptr ? lazy->stop_requested() : state != nullptr && state->stop_requested();
}

}  // namespace eddy::detail
