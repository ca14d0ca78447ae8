// runtime/hooks.cpp: see hooks.hpp.
#include "hooks.hpp"

#include <cstdio>
#include <exception>

namespace eddy::detail {

void report_hook_exception(const char* what) noexcept {
    try {
        throw;  // the exception being handled, to tell a std::exception from the rest
    } catch (const std::exception& e) {
        std::fprintf(stderr, "eddy: RuntimeConfig::%s threw (ignored): %s\n", what, e.what());
    } catch (...) {
        std::fprintf(stderr, "eddy: RuntimeConfig::%s threw (ignored; not a std::exception)\n", what);
    }
}

void call_task_hook(const std::function<void(const TaskInfo&)>& hook, const char* what, const FrameHeader* h) noexcept {
    const TaskInfo info = task_info_of(h);
    call_guarded(what, [&] { hook(info); });
}

void call_worker_hook(const std::function<void(std::size_t)>& hook, const char* what, std::size_t worker) noexcept {
    call_guarded(what, [&] { hook(worker); });
}

}  // namespace eddy::detail
