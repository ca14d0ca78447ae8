//! eddy/tasks/task_local.hpp: task_local<T>, a value scoped to a task and the tasks under it
//! (Tokio's task_local!): request ids, tracing spans, a tenant, a deadline budget.
//!
//!     eddy::task_local<std::string> request_id;            // a global or static, like a key
//!
//!     co_await request_id.scope(make_id(), handle(req));   // handle() and all it awaits see it
//!     ...
//!     const std::string& id = co_await request_id.get();   // anywhere below that scope
//!     const std::string* maybe = co_await request_id.try_get();  // nullptr when unbound
//!
//! Who sees a binding: the task run by `scope(value, task)` and, as for cancellation, every
//! task it awaits, the children of when_all, when_any, with_timeout and a TaskGroup started
//! below it, and shield()ed tasks. Not spawned tasks (eddy::spawn, JoinSet): as in Tokio, a
//! spawned task starts with no bindings; pass the value, or bind it again in the new task.
//! A nested `scope` of the same key hides the outer value for the tasks under it only.
//!
//! The value lives in the scope's frame, for as long as the task runs: get() hands out a
//! reference to it, const because the children of a when_all read it in parallel (put a
//! std::atomic or a lock inside T for shared mutable state).
//!
//! Cost: a read is O(1), with no map and no lock: each key has a slot number fixed when it is
//! constructed, and every scope carries a table of the values bound above it, indexed by slot.
//! A binding copies its parent's table (one pointer per key in the program, so a few words),
//! inline up to kInline keys and in one allocation beyond.
//!
//! Errors: get() on a key not bound for the calling task throws eddy::TaskLocalUnset (a
//! std::logic_error); try_get() returns nullptr instead. A key must outlive the tasks that
//! read it; it is neither copyable nor movable.
//! @file
#pragma once

#include <algorithm>
#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/awaitable.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy {

namespace detail {

/// The next key's slot. A function-local static of an inline function: one per program.
inline std::uint32_t next_task_local_slot() noexcept {
    static std::atomic<std::uint32_t> next{0};
    return next.fetch_add(1, std::memory_order_relaxed);  // a counter: nothing to order
}

/// The values a binding's scope carries: its parent's, with `slot` set to `value`.
class LocalTable {
public:
    static constexpr std::uint32_t kInline = 8;

    LocalTable(const TaskLocals& parent, std::uint32_t slot, const void* value) {
        size_ = std::max(parent.size, slot + 1);
        if (size_ > kInline) {
            heap_ = std::make_unique<const void*[]>(size_);
            values_ = heap_.get();
        }
        std::fill(values_, values_ + size_, nullptr);
        std::copy(parent.values, parent.values + parent.size, values_);
        values_[slot] = value;
    }
    LocalTable(const LocalTable&) = delete;
    LocalTable& operator=(const LocalTable&) = delete;

    TaskLocals view() const noexcept { return TaskLocals{values_, size_}; }

private:
    const void* inline_[kInline];
    std::unique_ptr<const void*[]> heap_;
    const void** values_ = inline_;
    std::uint32_t size_ = 0;
};

/// Awaiting it gives the calling task's binding of `slot` (nullptr: unbound), without
/// suspending.
class LocalLookup {
public:
    explicit LocalLookup(std::uint32_t slot) noexcept : slot_(slot) {}
    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
        const TaskCancellation* scope = cancellation_scope_of(h);
        value_ = scope != nullptr ? scope->locals.get(slot_) : nullptr;
        return false;
    }

protected:
    std::uint32_t slot_;
    const void* value_ = nullptr;
};

}  // namespace detail

/// A value bound for a task and everything it awaits (Tokio's task_local!): see the file's
/// prologue.
template <class T>
class task_local {
    static_assert(std::is_object_v<T> && !std::is_array_v<T>, "eddy::task_local<T>: T must be an object type");

public:
    task_local() noexcept : slot_(detail::next_task_local_slot()) {}
    task_local(const task_local&) = delete;
    task_local& operator=(const task_local&) = delete;

    /// Runs `task` with this key bound to `value` (see above); gives the task's result.
    template <class R>
    Task<R> scope(T value, Task<R> task) const {
        const detail::TaskCancellation* parent = co_await detail::CurrentScope{};
        const detail::LocalTable table(parent != nullptr ? parent->locals : detail::TaskLocals{}, slot_,
                                       std::addressof(value));
        // The parent's token (a copy: share() marks the parent's too) and the new table.
        detail::TaskCancellation own(parent, detail::TaskCancellation::Derive{});
        own.locals = table.view();
        co_return co_await typename Task<R>::Awaiter(task, &own);
    }

    /// The same for any other awaitable (a frame of its own).
    template <detail::NonTaskAwaitable A>
    auto scope(T value, A&& a) const {
        return scope(std::move(value), detail::in_place_task(std::forward<A>(a)));
    }

    class [[nodiscard]] GetAwaiter : public detail::LocalLookup {
    public:
        using LocalLookup::LocalLookup;
        const T& await_resume() const {
            if (value_ == nullptr) throw TaskLocalUnset("eddy::task_local::get: no value is bound for this task");
            return *static_cast<const T*>(value_);
        }
    };
    class [[nodiscard]] TryGetAwaiter : public detail::LocalLookup {
    public:
        using LocalLookup::LocalLookup;
        const T* await_resume() const noexcept { return static_cast<const T*>(value_); }
    };

    /// `co_await key.get()`: the calling task's value; TaskLocalUnset when unbound.
    GetAwaiter get() const noexcept { return GetAwaiter(slot_); }
    /// `co_await key.try_get()`: a pointer to the value, or nullptr when unbound.
    TryGetAwaiter try_get() const noexcept { return TryGetAwaiter(slot_); }

private:
    std::uint32_t slot_;
};

}  // namespace eddy
