//! eddy/runtime/spawn.hpp: eddy::spawn, starting a task on the caller's runtime.
//! @file
#pragma once

#include <string_view>

#include <eddy/runtime/detail/scheduler_api.hpp>
#include <eddy/runtime/detail/task_name.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/tasks/awaitable.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy {

/// Starts `task` concurrently on the runtime whose worker calls this, and returns its handle.
/// It runs even if the handle is dropped.
///
/// Where it runs (Tokio's LIFO slot): the new task runs next on the calling worker, as soon as
/// the caller suspends; it is not stealable meanwhile. The task it displaces from that slot
/// (the previous spawn) moves to the worker's deque, where idle workers are woken to steal it.
/// So spawning several tasks spreads them over the workers, while a spawn followed by
/// co_await runs on the same warm core. A caller that keeps computing without suspending
/// delays its most recent spawn: insert `co_await eddy::yield_now()` in long loops.
///
/// Throws eddy::WrongThread off a worker thread (use Runtime::spawn there),
/// eddy::RuntimeStopped once the runtime is shutting down, eddy::BrokenTask for an empty
/// task. On any of these the task is destroyed without running.
template <class T>
JoinHandle<T> spawn(Task<T> task) {
    auto h = detail::TaskAccess::release(task);
    if (!h) throw BrokenTask("eddy::spawn: the task is empty (moved-from or already awaited)");
    detail::spawn_root(detail::current_scheduler(), h.promise(), h);
    return JoinHandle<T>(detail::header_of(h.address()));
}

/// spawn(), with a name that Runtime::dump() shows for the task (copied; one allocation).
template <class T>
JoinHandle<T> spawn(Task<T> task, std::string_view name) {
    if (!task) throw BrokenTask("eddy::spawn: the task is empty (moved-from or already awaited)");
    detail::name_task(detail::TaskAccess::get(task), name);  // on failure `task` still owns its frame
    return spawn(std::move(task));
}

/// spawn(), for a task that can be aborted: the handle's abort() and abort_handle() work
/// (eddy/runtime/abort_handle.hpp). The task runs under a cancellation of its own, which
/// costs one allocation per task and a registration at each of its waits.
template <class T>
JoinHandle<T> spawn_abortable(Task<T> task) {
    auto h = detail::TaskAccess::release(task);
    if (!h) throw BrokenTask("eddy::spawn_abortable: the task is empty (moved-from or already awaited)");
    detail::make_abortable(h.promise(), h);
    detail::spawn_root(detail::current_scheduler(), h.promise(), h);
    return JoinHandle<T>(detail::header_of(h.address()));
}

/// spawn_abortable() for an awaitable that owns what it uses (see spawn below).
template <detail::NonTaskAwaitable A>
auto spawn_abortable(A&& a) {
    return spawn_abortable(detail::detached_task(std::forward<A>(a)));
}

/// spawn() for an awaitable that is not a Task (eddy/tasks/awaitable.hpp): a combinator's
/// result, a sleep, a type of your own; it runs in a frame of its own. Only what owns
/// everything it uses: an operation that borrows from the caller (a read into the caller's
/// buffer, a lock of the caller's Mutex) or cannot move is refused at compile time, since
/// the spawned task runs after the caller has moved on.
template <detail::NonTaskAwaitable A>
auto spawn(A&& a) {
    return spawn(detail::detached_task(std::forward<A>(a)));
}

}  // namespace eddy
