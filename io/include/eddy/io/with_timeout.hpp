// eddy/io/with_timeout.hpp: eddy::with_timeout and eddy::with_deadline, a task with a time limit.
//
//     std::string line = co_await eddy::with_timeout(read_line(conn), 5s);   // or TimedOut
//
// The task and a timer race as the two children of eddy::when_any (so the task runs on the
// workers like any when_any child). If the task finishes first, its value is returned (or its
// exception rethrown) and the timer is cancelled. If the time runs out first, the task is
// cancelled (whatever it awaits throws eddy::OperationCancelled, eddy/tasks/cancellation.hpp),
// with_timeout waits until it has stopped, and then throws eddy::TimedOut (a
// std::system_error with std::errc::timed_out), even if the task managed to finish with a
// value meanwhile: the deadline decides. An exception rather than std::optional, so that
// `Task<std::optional<T>>` stays unambiguous and a timeout cannot be mistaken for a value.
// Cancelling the awaiter cancels both (OperationCancelled). Awaiting off a worker throws
// eddy::WrongThread; an empty task eddy::BrokenTask.
#pragma once

#include <chrono>
#include <functional>
#include <type_traits>
#include <utility>
#include <variant>

#include <eddy/io/sleep.hpp>
#include <eddy/runtime/when_any.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy {

namespace detail {

inline Task<void> expire_at(std::chrono::steady_clock::time_point deadline) { co_await sleep_until(deadline); }

template <class T>
Task<T> race_with_timer(Task<T> task, Task<void> timer) {
    auto r = co_await when_any(std::move(task), std::move(timer));
    if (r.index() == 1) throw TimedOut();
    if constexpr (std::is_void_v<T>) {
        co_return;
    } else if constexpr (std::is_reference_v<T>) {
        co_return std::get<0>(r).get();
    } else {
        co_return std::get<0>(std::move(r));
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
