// runtime/hooks.hpp: calling RuntimeConfig's hooks (config.hpp): a hook that throws is
// reported on stderr and ignored, whichever it is (call_guarded).
//
// Who calls what: Scheduler::spawn (on_task_spawn), Scheduler::finish_root (on_task_complete),
// Worker::before_poll/after_poll (on_task_first_poll, on_poll_start, on_poll_end), the
// threads' start and stop (on_thread_start, on_thread_stop: settings.cpp), the watchdog
// (on_slow_poll, on_slow_poll_detail). Each caller tests first whether the hook is set: with
// none set, nothing here runs.
#pragma once

#include "private.hpp"

#include <cstddef>
#include <functional>

#include <eddy/runtime/config.hpp>
#include <eddy/tasks/detail/frame_header.hpp>

namespace eddy::detail {

/// The TaskInfo of the root task whose frame follows `h` (its id and name).
inline TaskInfo task_info_of(const FrameHeader* h) noexcept {
    TaskInfo info;
    info.id = reinterpret_cast<std::uintptr_t>(h);
    if (h->extra != nullptr) info.name = h->extra->name;
    return info;
}

/// From a catch block: reports the exception being handled as thrown by RuntimeConfig::`what`.
void report_hook_exception(const char* what) noexcept;

/// Calls `call()`, a call to RuntimeConfig::`what`; an exception it throws is reported and
/// ignored.
template <class F>
void call_guarded(const char* what, F&& call) noexcept {
    try {
        call();
    } catch (...) {
        report_hook_exception(what);
    }
}

/// Calls `hook` (set) with `h`'s TaskInfo; `what` names it in the report of an exception.
void call_task_hook(const std::function<void(const TaskInfo&)>& hook, const char* what, const FrameHeader* h) noexcept;
/// Calls `hook` (set) with the worker's index.
void call_worker_hook(const std::function<void(std::size_t)>& hook, const char* what, std::size_t worker) noexcept;

}  // namespace eddy::detail
