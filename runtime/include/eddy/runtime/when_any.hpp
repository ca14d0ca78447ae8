//! eddy/runtime/when_any.hpp: eddy::when_any, racing tasks: the first to finish wins.
//!
//!     std::variant<int, std::string> r = co_await eddy::when_any(fetch_a(), fetch_b());
//!     if (r.index() == 0) ... std::get<0>(r) ...
//!     eddy::WhenAnyResult<int> w = co_await eddy::when_any(std::move(tasks));  // w.index, w.value
//!
//! Semantics:
//!   * Lazy, parallel and resumed like when_all (eddy/runtime/when_all.hpp):
//!     the first child runs at once on the awaiting worker, the others are queued on its deque.
//!   * The first child to finish wins, whether it returned or threw. The others are then
//!     cancelled (what they await throws eddy::OperationCancelled; see
//!     eddy/tasks/cancellation.hpp) and waited for: when when_any returns, no child is
//!     running and every child frame is gone with its buffers. Their results and exceptions
//!     are discarded, also the value of a loser that finished before its cancellation took
//!     effect: race only work whose result may be dropped (a read's bytes may not; use
//!     eddy::with_timeout for that, which never drops a finished task's value).
//!   * The winner's value comes back with its index: a std::variant with one alternative per
//!     argument (index() is the winner, even when two arguments have the same type;
//!     `Task<void>` gives std::monostate, `Task<T&>` std::reference_wrapper<T>), or for a
//!     vector a WhenAnyResult<T> {index, value} (a plain index for `Task<void>`).
//!   * If the winner threw, its exception is rethrown after the others stopped.
//!   * Cancelling the awaiter cancels every child; the first to finish then usually carries
//!     OperationCancelled, which is rethrown.
//! Errors: an empty child throws eddy::BrokenTask and awaiting off a worker eddy::WrongThread,
//! before any child starts; an empty vector throws std::invalid_argument (nothing could win).
//! @file
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <eddy/runtime/detail/children.hpp>
#include <eddy/runtime/detail/when_any_state.hpp>
#include <eddy/tasks/awaitable.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy {

namespace detail {

template <class T>
struct AnyValue {
    using type = child_value_t<T>;
};
template <class T>
struct AnyValue<T&> {
    using type = std::reference_wrapper<T>;
};
template <class T>
using any_value_t = typename AnyValue<T>::type;

/// Builds the variant from child `I` (the winner), or rethrows its exception.
template <class Variant, std::size_t I, class Tuple>
Variant take_winner(Tuple& tasks) {
    auto& task = std::get<I>(tasks);
    using T = typename std::remove_reference_t<decltype(task)>::value_type;
    if constexpr (std::is_void_v<T>) {
        take_child(task);
        return Variant(std::in_place_index<I>);
    } else {
        return Variant(std::in_place_index<I>, take_child(task));
    }
}

template <class Variant, class Tuple, std::size_t... Is>
Variant take_winner_at(std::size_t winner, Tuple& tasks, std::index_sequence<Is...>) {
    using Take = Variant (*)(Tuple&);
    static constexpr Take table[] = {&take_winner<Variant, Is, Tuple>...};
    return table[winner](tasks);
}

}  // namespace detail

/// The winner of `when_any(std::vector<Task<T>>)`: its position in the vector and its value.
template <class T>
struct WhenAnyResult {
    std::size_t index;  ///< the winner's position in the vector
    T value;            ///< its value
};

/// The first task to finish wins: its index and value as a std::variant; the others are
/// cancelled and have stopped when it returns (see the file's prologue).
template <class... Ts>
Task<std::variant<detail::any_value_t<Ts>...>> when_any(Task<Ts>... tasks) {
    static_assert(sizeof...(Ts) > 0, "eddy::when_any needs at least one task");
    using Variant = std::variant<detail::any_value_t<Ts>...>;
    using Child = std::pair<detail::PromiseBase*, std::coroutine_handle<>>;
    std::array<Child, sizeof...(Ts)> children{detail::child_of(tasks, "eddy::when_any")...};
    auto get = [&children](std::size_t i) { return children[i]; };
    using Awaiter = detail::ChildrenAwaiter<detail::WhenAnyState, decltype(get)>;
    Awaiter children_done("eddy::when_any", sizeof...(Ts), get);
    detail::WhenAnyState& state = co_await children_done;
    const std::size_t winner = state.winner();
    auto all = std::forward_as_tuple(tasks...);
    co_return detail::take_winner_at<Variant>(winner, all, std::index_sequence_for<Ts...>{});
}

/// when_any of any awaitables (eddy/tasks/awaitable.hpp), Tasks among them: each that is not
/// a Task runs as one of its own (a coroutine frame). (An operation raced against a sleep is
/// cheaper: eddy/time/race_sleep.hpp.)
template <class... As>
requires(sizeof...(As) > 0 && (Awaitable<As> && ...) &&
         (detail::NonTaskAwaitable<As> || ...)) auto when_any(As&&... as) {
    return when_any(detail::in_place_task(std::forward<As>(as))...);
}

/// The first task of a vector to finish wins: its position and value (the position alone for
/// void). std::invalid_argument for an empty vector.
template <class T>
Task<std::conditional_t<std::is_void_v<T>, std::size_t, WhenAnyResult<T>>> when_any(std::vector<Task<T>> tasks) {
    static_assert(std::is_void_v<T> || std::is_object_v<T>,
                  "when_any(std::vector<Task<T&>>) is not supported; return pointers instead");
    if (tasks.empty()) throw std::invalid_argument("eddy::when_any: no tasks (nothing could ever finish first)");
    for (const Task<T>& t : tasks) (void)detail::child_of(t, "eddy::when_any");  // before anything starts
    auto get = [&tasks](std::size_t i) { return detail::child_of(tasks[i], "eddy::when_any"); };
    using Awaiter = detail::ChildrenAwaiter<detail::WhenAnyState, decltype(get)>;
    Awaiter children_done("eddy::when_any", tasks.size(), get);
    detail::WhenAnyState& state = co_await children_done;
    const std::size_t winner = state.winner();
    if constexpr (std::is_void_v<T>) {
        detail::take_child(tasks[winner]);
        co_return winner;
    } else {
        co_return WhenAnyResult<T>{winner, detail::take_child(tasks[winner])};
    }
}

/// when_any over any other range of awaitables, moved out of it: as for a vector of Tasks.
template <detail::AwaitableRange R>
auto when_any(R&& awaitables) {
    return when_any(detail::tasks_of(std::forward<R>(awaitables)));
}

}  // namespace eddy
