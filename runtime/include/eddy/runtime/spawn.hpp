// eddy/runtime/spawn.hpp: eddy::spawn, starting a task on the caller's runtime.
#pragma once

#include <eddy/runtime/detail/scheduler_api.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy {

/// Starts `task` concurrently on the runtime whose worker calls this, and returns its handle.
/// The task is queued on the calling worker (idle workers may steal it); it runs even if the
/// handle is dropped. Throws eddy::WrongThread off a worker thread (use Runtime::spawn
/// there), eddy::RuntimeStopped when the runtime is shutting down, eddy::BrokenTask for an
/// empty task. On any of these the task is destroyed without running.
template <class T>
JoinHandle<T> spawn(Task<T> task) {
    auto h = detail::TaskAccess::release(task);
    if (!h) throw BrokenTask("eddy::spawn: the task is empty (moved-from or already awaited)");
    detail::spawn_root(detail::current_scheduler(), h.promise(), h);
    return JoinHandle<T>(detail::header_of(h.address()));
}

} // namespace eddy
