// eddy/tasks/detail/task_cancellation.hpp: the scope a task runs under (its cancellation and
// what else it inherits from whoever awaits it), and the lazily made stop source of a
// combinator. Not for users.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <stop_token>
#include <utility>

namespace eddy::detail {

class LinkedStopSource;

/// The task-local values a scope carries (eddy/tasks/task_local.hpp): values[slot].
struct TaskLocals {
    const void* const* values = nullptr;  // values[slot]: the bound value, or nullptr
    std::uint32_t size = 0;
    const void* get(std::uint32_t slot) const noexcept { return slot < size ? values[slot] : nullptr; }
};

/// The cancellation a task runs under: a std::stop_token, in the frame of whoever started
/// the task (a combinator's state, a with_timeout, with_stop_token), shared by every task it
/// awaits. `shared` records that a copy of the token left the tree of tasks
/// (this_task::stop_token(), TaskGroup::stop_token()): such a copy may outlive the tasks, so
/// eddy::with_timeout, which reuses the stop sources of tasks that finished unstopped, must
/// not reuse this one (io/timeout.cpp). Relaxed: read after the tasks finished, which the
/// completion chain orders.
///
/// A combinator's scope makes its token on demand (`lazy`, see LinkedStopSource): get() is
/// the token, made at the first call; a scope whose tasks never wait on anything cancellable
/// (a fork-join that only computes) never allocates a stop source.
///
/// The scope also carries what else a task inherits from whoever awaits it: `unconstrained`,
/// set by eddy::coop::unconstrained, exempts the tasks under it from the cooperative budget
/// (eddy/runtime/coop.hpp); `locals`, the task-local values bound above it
/// (eddy/tasks/task_local.hpp). A scope nested under another (a combinator's, a task-local
/// binding's) inherits both with inherit(); one derived from its parent (same token) also
/// passes share() on to it.
struct TaskCancellation {
    explicit TaskCancellation(std::stop_token t = {}) noexcept : token(std::move(t)) {}
    /// A scope with its parent's token (or its parent's lazy source) and everything else it
    /// inherits (nullptr: none).
    struct Derive {};
    TaskCancellation(const TaskCancellation* parent, Derive) noexcept
        : token(parent != nullptr ? parent->token : std::stop_token{}),
          lazy(parent != nullptr ? parent->lazy : nullptr),
          origin(parent) {
        inherit(parent);
    }
    TaskCancellation(const TaskCancellation&) = delete;
    TaskCancellation& operator=(const TaskCancellation&) = delete;

    /// The token; made now when this scope makes it on demand. std::bad_alloc there ends the
    /// program (it is called from noexcept await_suspends), as an allocation failure in
    /// Tokio's runtime does.
    const std::stop_token* get() const noexcept;
    /// True when a stop may come (without making the token).
    bool stop_possible() const noexcept { return lazy != nullptr || token.stop_possible(); }
    /// True when a stop was requested (without making the token).
    bool stop_requested() const noexcept;

    /// A copy for code outside the task tree; marks the token as shared (here and in the
    /// scope it was derived from, whose token it is).
    std::stop_token share() const noexcept {
        shared.store(true, std::memory_order_relaxed);
        if (origin != nullptr) (void)origin->share();
        return *get();
    }

    /// Takes what `parent` passes down besides its token (nothing when it is null).
    void inherit(const TaskCancellation* parent) noexcept {
        unconstrained = parent != nullptr && parent->unconstrained;
        locals = parent != nullptr ? parent->locals : TaskLocals{};
    }

    std::stop_token token;  // unused when `lazy` is set
    LinkedStopSource* lazy = nullptr;
    mutable std::atomic<bool> shared{false};
    bool unconstrained = false;  // written before any task runs under the scope
    TaskLocals locals;           // likewise
    const TaskCancellation* origin = nullptr;  // the scope whose token this one copies
};

/// A combinator's own cancellation (when_all, when_any, TaskGroup, with_stop_token), stopped
/// when its parent's is, and made only when needed.
///
/// Why lazy: the source (a std::stop_source: an allocation, and a callback registered on the
/// parent's token) matters only if some task under it waits on something cancellable, or
/// the combinator stops its children. A fork-join of pure computation (each node a when_all
/// of two calls) does neither, and paid both at every node. So the block holding the source
/// is made by the first get() of the scope's token (a child about to wait registers its
/// cancellation there); a stop requested before that is only recorded (`kStopped`) and the
/// block, when made, starts stopped. The parent's token is linked before the block is
/// published, so a stop of the parent is never missed: it reaches the block through the
/// link, or was already visible when the link was made (std::stop_callback runs at once
/// then). A child that never asked for the token was never waiting where a stop could reach
/// it, and one that asks later finds the stop.
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
    ~LinkedStopSource() {
        Block* b = block_.load(std::memory_order_acquire);  // pairs with make()'s publication
        if (b != stopped_marker()) delete b;
    }

    /// The cancellation children run under; stays valid as long as this object.
    const TaskCancellation* token() const noexcept { return &scope_; }

    /// The stop source's token, made now if needed. Any thread.
    const std::stop_token* get() noexcept {
        Block* b = block_.load(std::memory_order_acquire);  // pairs with make()'s CAS
        if (b != nullptr && b != stopped_marker()) return &b->token;
        return &make(b)->token;
    }

    /// Stops the children (true when this call did). Any thread; allocates nothing.
    bool request_stop() noexcept {
        Block* b = block_.load(std::memory_order_acquire);
        for (;;) {
            if (b == stopped_marker()) return false;
            if (b != nullptr) return b->source.request_stop();
            // Acq_rel: pairs with make()'s CAS (on failure `b` is the block it published).
            if (block_.compare_exchange_weak(b, stopped_marker(), std::memory_order_acq_rel,
                                             std::memory_order_acquire))
                return true;
        }
    }

    bool stop_requested() const noexcept {
        Block* b = block_.load(std::memory_order_acquire);
        if (b == stopped_marker()) return true;
        if (b != nullptr) return b->source.stop_requested();
        return parent_ != nullptr && parent_->stop_requested();  // not linked yet
    }

private:
    struct Forward {
        std::stop_source* target;
        void operator()() const noexcept { target->request_stop(); }
    };
    struct Block {
        std::stop_source source;
        std::stop_token token = source.get_token();
        // Destroyed first: its destructor waits for a forward running on another thread.
        std::optional<std::stop_callback<Forward>> link;
    };
    // A non-null address that is never a Block's: "stopped before the block was made".
    static Block* stopped_marker() noexcept { return reinterpret_cast<Block*>(&marker_storage); }
    static inline char marker_storage = 0;  // only its address is used

    Block* make(Block* seen) noexcept {
        for (;;) {
            Block* fresh = new Block;
            if (seen == stopped_marker()) fresh->source.request_stop();
            // Link before publishing: see above. May forward at once.
            if (parent_ != nullptr && parent_->stop_possible())
                fresh->link.emplace(*parent_->get(), Forward{&fresh->source});
            // Acq_rel: release publishes the block; acquire (on failure) sees another's.
            if (block_.compare_exchange_strong(seen, fresh, std::memory_order_acq_rel, std::memory_order_acquire))
                return fresh;
            delete fresh;  // another thread made it, or a stop was recorded meanwhile
            if (seen != stopped_marker()) return seen;
        }
    }

    const TaskCancellation* parent_;
    TaskCancellation scope_;
    // nullptr: not made, no stop; stopped_marker(): not made, stopped; else the block.
    std::atomic<Block*> block_{nullptr};
};

inline const std::stop_token* TaskCancellation::get() const noexcept { return lazy != nullptr ? lazy->get() : &token; }

inline bool TaskCancellation::stop_requested() const noexcept {
    return lazy != nullptr ? lazy->stop_requested() : token.stop_requested();
}

} // namespace eddy::detail
