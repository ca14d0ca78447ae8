// eddy/runtime/when_all.hpp: eddy::when_all, awaiting several tasks that run in parallel.
//
//     auto [a, b] = co_await eddy::when_all(twice(1), twice(20));       // std::tuple<int, int>
//     std::vector<int> all = co_await eddy::when_all(std::move(tasks)); // std::vector<Task<int>>
//
// Semantics:
//   * Lazy: nothing starts until the returned Task is awaited (or spawned).
//   * All children are then queued at once on the awaiting worker's deque, so idle workers
//     steal them and they run in parallel; there is no start order to rely on.
//   * The awaiter resumes exactly once, after the last child finished, on the worker that
//     finished it.
//   * Results come in argument (or vector) order. A `Task<void>` child contributes
//     std::monostate to the tuple; `when_all(std::vector<Task<void>>)` returns void;
//     a `Task<T&>` child contributes T&.
//   * If a child throws, the others are cancelled (what they await throws
//     eddy::OperationCancelled, see eddy/tasks/cancellation.hpp) and waited for; then the
//     first exception (in time) is rethrown; the other results and exceptions are discarded.
//     No child is left running.
//   * Cancelling the awaiter cancels every child; the when_all then rethrows the first
//     child's exception (usually OperationCancelled).
//   * Empty input completes at once.
// Errors: an empty child task throws eddy::BrokenTask, and awaiting off a worker thread
// throws eddy::WrongThread, both before any child starts.
#pragma once

#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <eddy/runtime/detail/children.hpp>
#include <eddy/runtime/detail/when_all_state.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy {

template <class... Ts>
Task<std::tuple<detail::child_value_t<Ts>...>> when_all(Task<Ts>... tasks) {
    using Child = std::pair<detail::PromiseBase*, std::coroutine_handle<>>;
    std::array<Child, sizeof...(Ts)> children{detail::child_of(tasks, "eddy::when_all")...};
    auto get = [&children](std::size_t i) { return children[i]; };
    using Awaiter = detail::ChildrenAwaiter<detail::WhenAllState, decltype(get)>;
    if constexpr (sizeof...(Ts) > 0) {
        Awaiter children_done("eddy::when_all", sizeof...(Ts), get);
        detail::WhenAllState& state = co_await children_done;
        state.rethrow_if_failed();
    }
    co_return std::tuple<detail::child_value_t<Ts>...>{detail::take_child(tasks)...};
}

/// when_all of Tasks and awaitables that become Tasks (eddy::Timeout), mixed.
template <class... As>
    requires(sizeof...(As) > 0 && (detail::TaskOrIntoTask<As> && ...) && (detail::IntoTask<As> || ...))
auto when_all(As&&... as) {
    return when_all(detail::to_task(std::forward<As>(as))...);
}

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

} // namespace eddy
