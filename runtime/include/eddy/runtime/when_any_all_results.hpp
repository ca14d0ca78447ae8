//! eddy/runtime/when_any_all_results.hpp: eddy::when_any_all_results, a race that drops no
//! finished result.
//!
//!     auto r = co_await eddy::when_any_all_results(read_frame(a), read_frame(b));
//!     r.winner                      // 0 or 1: who finished first
//!     std::get<0>(r.values)         // std::optional<Frame>: engaged for the winner, and for a
//!                                   // loser that returned before its cancellation took effect
//!
//! eddy::when_any (eddy/runtime/when_any.hpp) keeps only the winner's value: a loser that had
//! already finished when the losers were cancelled (two reads whose data arrived together) is
//! thrown away with its value, as Tokio's select! does. when_any_all_results runs the same race
//! (the same lazy start, the same cancellation of the losers, the same wait until every child
//! frame is gone) and then hands back every child that returned a value: the winner's and each
//! loser's that returned anyway. A loser that stopped by OperationCancelled, or failed with
//! another exception, has an empty slot (its exception is dropped, as in when_any). What a
//! loser had consumed before it threw (the first half of a message it was still reading) is
//! its own to keep or give back: only what a task returns is kept here.
//!
//! Results:
//!   * variadic: WhenAnyAll<Ts...> {winner, values}, `values` a std::tuple of one
//!     std::optional per argument (std::monostate for Task<void>, std::reference_wrapper<T>
//!     for Task<T&>);
//!   * vector: WhenAnyAllVector<T> {winner, values}, `values[i]` the i-th task's slot.
//! If the winner threw, its exception is rethrown after the others stopped (the losers'
//! values are dropped then: nothing won). Errors as for when_any: an empty child throws
//! eddy::BrokenTask and awaiting off a worker eddy::WrongThread, before any child starts; an
//! empty vector std::invalid_argument.
//! @file
#pragma once

#include <array>
#include <cstddef>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <eddy/runtime/detail/children.hpp>
#include <eddy/runtime/detail/when_any_state.hpp>
#include <eddy/runtime/when_any.hpp>
#include <eddy/tasks/awaitable.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy {

/// The result of when_any_all_results(tasks...): see above.
template <class... Ts>
struct WhenAnyAll {
    std::size_t winner;  ///< the argument that finished first
    /// Each child's value, or std::nullopt for one that ended by an exception.
    std::tuple<std::optional<detail::any_value_t<Ts>>...> values;
};

/// The result of when_any_all_results(std::vector<Task<T>>): see above.
template <class T>
struct WhenAnyAllVector {
    std::size_t winner;  ///< the position of the task that finished first
    /// Each task's value, or std::nullopt for one that ended by an exception.
    std::vector<std::optional<detail::any_value_t<T>>> values;
};

namespace detail {

/// A finished child's value, or nothing when it ended by an exception (which is dropped).
template <class T>
std::optional<any_value_t<T>> returned_value(Task<T>& t) {
    if (TaskAccess::get(t).promise().exception()) return std::nullopt;
    if constexpr (std::is_void_v<T>) {
        take_child(t);
        return std::monostate{};
    } else if constexpr (std::is_reference_v<T>) {
        return std::ref(take_child(t));
    } else {
        return take_child(t);
    }
}

}  // namespace detail

/// Races the tasks like when_any, and gives what every one of them returned (see above).
template <class... Ts>
Task<WhenAnyAll<Ts...>> when_any_all_results(Task<Ts>... tasks) {
    static_assert(sizeof...(Ts) > 0, "eddy::when_any_all_results needs at least one task");
    using Child = std::pair<detail::PromiseBase*, std::coroutine_handle<>>;
    std::array<Child, sizeof...(Ts)> children{detail::child_of(tasks, "eddy::when_any_all_results")...};
    auto get = [&children](std::size_t i) { return children[i]; };
    using Awaiter = detail::ChildrenAwaiter<detail::WhenAnyState, decltype(get)>;
    Awaiter children_done("eddy::when_any_all_results", sizeof...(Ts), get);
    detail::WhenAnyState& state = co_await children_done;
    const std::size_t winner = state.winner();
    std::array<const std::exception_ptr*, sizeof...(Ts)> failures{
        &detail::TaskAccess::get(tasks).promise().exception()...};
    if (*failures[winner]) std::rethrow_exception(*failures[winner]);
    co_return WhenAnyAll<Ts...>{winner, {detail::returned_value(tasks)...}};
}

/// when_any_all_results of any awaitables (eddy/tasks/awaitable.hpp), Tasks among them:
/// each that is not a Task runs as one of its own (a coroutine frame).
template <class... As>
requires(sizeof...(As) > 0 && (Awaitable<As> && ...) &&
         (detail::NonTaskAwaitable<As> || ...)) auto when_any_all_results(As&&... as) {
    return when_any_all_results(detail::in_place_task(std::forward<As>(as))...);
}

/// The same over a vector of tasks.
template <class T>
Task<WhenAnyAllVector<T>> when_any_all_results(std::vector<Task<T>> tasks) {
    static_assert(std::is_void_v<T> || std::is_object_v<T>,
                  "when_any_all_results(std::vector<Task<T&>>) is not supported; return pointers instead");
    if (tasks.empty())
        throw std::invalid_argument("eddy::when_any_all_results: no tasks (nothing could ever finish first)");
    for (const Task<T>& t : tasks) (void)detail::child_of(t, "eddy::when_any_all_results");  // before anything starts
    auto get = [&tasks](std::size_t i) { return detail::child_of(tasks[i], "eddy::when_any_all_results"); };
    using Awaiter = detail::ChildrenAwaiter<detail::WhenAnyState, decltype(get)>;
    Awaiter children_done("eddy::when_any_all_results", tasks.size(), get);
    detail::WhenAnyState& state = co_await children_done;
    const std::size_t winner = state.winner();
    if (const std::exception_ptr& e = detail::TaskAccess::get(tasks[winner]).promise().exception())
        std::rethrow_exception(e);
    WhenAnyAllVector<T> result{winner, {}};
    result.values.reserve(tasks.size());
    for (Task<T>& t : tasks) result.values.push_back(detail::returned_value(t));
    co_return result;
}

/// when_any_all_results over any other range of awaitables, moved out of it.
template <detail::AwaitableRange R>
auto when_any_all_results(R&& awaitables) {
    return when_any_all_results(detail::tasks_of(std::forward<R>(awaitables)));
}

}  // namespace eddy
