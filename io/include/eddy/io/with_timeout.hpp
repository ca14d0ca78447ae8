// eddy/io/with_timeout.hpp: eddy::with_timeout and eddy::with_deadline, a task with a time limit.
//
//     std::string line = co_await eddy::with_timeout(read_line(conn), 5s);   // or TimedOut
//
// The task and a timer race as two children on the workers (the machinery of eddy::when_any).
// If the task finishes first, its value is returned (or its exception rethrown) and the timer
// is cancelled. If the time runs out first, the task is cancelled (whatever it awaits throws
// eddy::OperationCancelled, eddy/tasks/cancellation.hpp) and with_timeout waits until it has
// stopped. Then:
//   * if it stopped by that cancellation, eddy::TimedOut is thrown (a std::system_error with
//     std::errc::timed_out);
//   * if it finished anyway (the cancel came too late: its read had completed, say), its
//     value is returned: a result is never thrown away, so no bytes a read consumed are lost;
//   * if it failed with another exception, that exception is rethrown.
// An exception rather than std::optional, so that `Task<std::optional<T>>` stays unambiguous
// and a timeout cannot be mistaken for a value. Cancelling the awaiter cancels both
// (OperationCancelled). Awaiting off a worker throws eddy::WrongThread; an empty task
// eddy::BrokenTask.
#pragma once

#include <array>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <type_traits>
#include <utility>

#include <eddy/io/sleep.hpp>
#include <eddy/runtime/detail/children.hpp>
#include <eddy/runtime/detail/when_any_state.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy {

namespace detail {

inline Task<void> expire_at(std::chrono::steady_clock::time_point deadline) { co_await sleep_until(deadline); }

template <class T>
Task<T> race_with_timer(Task<T> task, Task<void> timer) {
    using Child = std::pair<PromiseBase*, std::coroutine_handle<>>;
    std::array<Child, 2> children{child_of(task, "eddy::with_timeout"), child_of(timer, "eddy::with_timeout")};
    auto get = [&children](std::size_t i) { return children[i]; };
    ChildrenAwaiter<WhenAnyState, decltype(get)> race("eddy::with_timeout", 2, get);
    const WhenAnyState& state = co_await race;
    // Timed out: the timer finished first, by expiring (not by a cancellation from above),
    // and the task then stopped by the cancellation that followed. If the awaiter itself was
    // cancelled meanwhile, that is what the caller is told (OperationCancelled), so that a
    // TaskGroup member stopping this way is not mistaken for a failure.
    const bool expired = state.winner() == 1 && !TaskAccess::get(timer).promise().exception();
    const std::exception_ptr& failure = TaskAccess::get(task).promise().exception();
    if (expired && failure && is_cancellation(failure)) {
        const std::stop_token mine = co_await this_task::stop_token();
        if (mine.stop_requested()) throw OperationCancelled("eddy::with_timeout: the awaiter was cancelled");
        throw TimedOut();
    }
    if constexpr (std::is_void_v<T>) {
        take_child(task);
    } else {
        co_return take_child(task);
    }
}

} // namespace detail

/// `task`'s result, or eddy::TimedOut once `deadline` (steady clock) has passed.
template <class T>
Task<T> with_deadline(Task<T> task, std::chrono::steady_clock::time_point deadline) {
    return detail::race_with_timer(std::move(task), detail::expire_at(deadline));
}

/// `task`'s result, or eddy::TimedOut after `timeout` (measured from when the returned task
/// starts, which is when it is awaited).
template <class T, class Rep, class Period>
Task<T> with_timeout(Task<T> task, std::chrono::duration<Rep, Period> timeout) {
    // The timer is created when the race starts: sleep() reads the clock when it is awaited,
    // and saturates huge timeouts instead of overflowing.
    auto timer = [](std::chrono::duration<Rep, Period> d) -> Task<void> { co_await sleep(d); };
    return detail::race_with_timer(std::move(task), timer(timeout));
}

} // namespace eddy
