//! eddy/runtime/when_all.hpp: eddy::when_all, awaiting several tasks that run in parallel.
//!
//!     auto [a, b] = co_await eddy::when_all(twice(1), twice(20));       // std::tuple<int, int>
//!     std::vector<int> all = co_await eddy::when_all(std::move(tasks)); // std::vector<Task<int>>
//!
//! Semantics:
//!   * Lazy: nothing starts until the result is awaited (or spawned). The variadic form
//!     returns an eddy::WhenAll awaitable (below), the vector form a Task.
//!   * The first child then runs at once on the awaiting worker and the others are queued on
//!     its deque, so idle workers steal them and they run in parallel; there is no start
//!     order to rely on.
//!   * The awaiter resumes exactly once, after the last child finished, on the worker that
//!     finished it.
//!   * Results come in argument (or vector) order. A `Task<void>` child contributes
//!     std::monostate to the tuple; `when_all(std::vector<Task<void>>)` returns void;
//!     a `Task<T&>` child contributes T&.
//!   * If a child throws, the others are cancelled (what they await throws
//!     eddy::OperationCancelled, see eddy/tasks/cancellation.hpp) and waited for; then the
//!     first exception (in time) is rethrown; the other results and exceptions are discarded.
//!     No child is left running.
//!   * Cancelling the awaiter cancels every child; the when_all then rethrows the first
//!     child's exception (usually OperationCancelled).
//!   * Empty input completes at once.
//! Errors: an empty child task throws eddy::BrokenTask, and awaiting off a worker thread
//! throws eddy::WrongThread, both before any child starts.
//! @file
#pragma once

#include <coroutine>
#include <cstddef>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <eddy/runtime/detail/children.hpp>
#include <eddy/runtime/detail/when_all_state.hpp>
#include <eddy/tasks/awaitable.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy {

/// What when_all(tasks...) returns: an awaitable, not a coroutine of its own, so a
/// fork-join node costs its children's frames and nothing more (a when_all frame per node
/// made fib(30) through when_all 20 % slower than the same recursion through spawn). Await
/// it at once (`co_await eddy::when_all(a, b)`), or pass it where a Task goes (spawn,
/// block_on, when_any, with_timeout, ...; it then becomes one coroutine frame), or convert it
/// (`Task<std::tuple<A, B>> t = eddy::when_all(a, b);`). Movable until it is awaited;
/// awaited once (a second await throws eddy::BrokenTask, as for a Task).
template <class... Ts>
class [[nodiscard]] WhenAll {
public:
    /// The children's results in argument order (std::monostate for a void child).
    using value_type = std::tuple<detail::child_value_t<Ts>...>;

    /// Holds the tasks; nothing runs until it is awaited.
    explicit WhenAll(Task<Ts>... tasks) noexcept : tasks_(std::move(tasks)...) {}
    /// Movable until awaited.
    WhenAll(WhenAll&& other) noexcept : tasks_(std::move(other.tasks_)) {}
    WhenAll& operator=(WhenAll&&) = delete;
    WhenAll(const WhenAll&) = delete;

    bool await_ready() {
        // Every child present, before anything starts (BrokenTask otherwise).
        std::apply([](const Task<Ts>&... t) { (detail::child_of(t, "eddy::when_all"), ...); }, tasks_);
        if constexpr (sizeof...(Ts) == 0) {
            return true;
        } else {
            awaiter_.emplace("eddy::when_all", sizeof...(Ts), Get{&tasks_});
            return awaiter_->await_ready();
        }
    }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> parent) {
        // SAFETY: once the children are queued, `this` may be resumed past (and destroyed)
        // on another worker: ChildrenAwaiter touches nothing of it after its last arrival.
        return awaiter_->await_suspend(parent);
    }
    value_type await_resume() {
        if constexpr (sizeof...(Ts) > 0) awaiter_->await_resume().rethrow_if_failed();
        return std::apply([](Task<Ts>&... t) { return value_type{detail::take_child(t)...}; }, tasks_);
    }

    /// As a Task (one coroutine frame), for spawn, block_on, when_any and the like.
    Task<value_type> into_task() && { return wrap(std::move(*this)); }
    /// into_task(), implicitly.
    operator Task<value_type>() && { return wrap(std::move(*this)); }

private:
    struct Get {
        std::tuple<Task<Ts>...>* tasks;
        std::pair<detail::PromiseBase*, std::coroutine_handle<>> operator()(std::size_t i) const {
            std::pair<detail::PromiseBase*, std::coroutine_handle<>> out{};
            std::size_t k = 0;
            std::apply(
                [&](Task<Ts>&... t) { ((k++ == i ? (out = detail::child_of(t, "eddy::when_all"), 0) : 0), ...); },
                *tasks);
            return out;
        }
    };
    static Task<value_type> wrap(WhenAll self) { co_return co_await self; }

    std::tuple<Task<Ts>...> tasks_;
    std::optional<detail::ChildrenAwaiter<detail::WhenAllState, Get>> awaiter_;
};

/// The tasks run in parallel; awaiting the result gives their values in argument order (see
/// the file's prologue).
template <class... Ts>
WhenAll<Ts...> when_all(Task<Ts>... tasks) {
    return WhenAll<Ts...>(std::move(tasks)...);
}

/// when_all of any awaitables (eddy/tasks/awaitable.hpp), Tasks among them: each that is not
/// a Task runs as one of its own (a coroutine frame), so that it can run in parallel.
template <class... As>
requires(sizeof...(As) > 0 && (Awaitable<As> && ...) &&
         (detail::NonTaskAwaitable<As> || ...)) auto when_all(As&&... as) {
    return when_all(detail::in_place_task(std::forward<As>(as))...);
}

/// The tasks of a vector in parallel; their values in vector order (nothing for void).
template <class T>
Task<std::conditional_t<std::is_void_v<T>, void, std::vector<T>>> when_all(std::vector<Task<T>> tasks) {
    static_assert(std::is_void_v<T> || std::is_object_v<T>,
                  "when_all(std::vector<Task<T&>>) is not supported; return pointers instead");
    for (const Task<T>& t : tasks) (void)detail::child_of(t, "eddy::when_all");  // before anything starts
    auto get = [&tasks](std::size_t i) { return detail::child_of(tasks[i], "eddy::when_all"); };
    using Awaiter = detail::ChildrenAwaiter<detail::WhenAllState, decltype(get)>;
    if (!tasks.empty()) {
        Awaiter children_done("eddy::when_all", tasks.size(), get);
        detail::WhenAllState& state = co_await children_done;
        state.rethrow_if_failed();
    }
    if constexpr (std::is_void_v<T>) {
        for (Task<T>& t : tasks) detail::take_child(t);
    } else {
        std::vector<T> out;
        out.reserve(tasks.size());
        for (Task<T>& t : tasks) out.push_back(detail::take_child(t));
        co_return out;
    }
}

/// when_all over any other range of awaitables, moved out of it (`std::move(handles)`, a
/// std::vector<JoinHandle<T>> say): as for a vector of Tasks, each element a Task of its own.
template <detail::AwaitableRange R>
auto when_all(R&& awaitables) {
    return when_all(detail::tasks_of(std::forward<R>(awaitables)));
}

}  // namespace eddy
