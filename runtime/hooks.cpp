// runtime/hooks.cpp: see hooks.hpp.
#include "hooks.hpp"

#include <cstdio>
#include <exception>

namespace eddy::detail {
namespace {

template <class F>
void guarded(const char* what, F&& call) noexcept {
    try {
        call();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "eddy: RuntimeConfig::%s threw (ignored): %s\n", what, e.what());
    } catch (...) {
        std::fprintf(stderr, "eddy: RuntimeConfig::%s threw (ignored; not a std::exception)\n", what);
    }
}

}  // namespace

void call_task_hook(const std::function<void(const TaskInfo&)>& hook, const char* what, const FrameHeader* h) noexcept {
    const TaskInfo info = task_info_of(h);
    guarded(what, [&] { hook(info); });
}

void call_worker_hook(const std::function<void(std::size_t)>& hook, const char* what, std::size_t worker) noexcept {
    guarded(what, [&] { hook(worker); });
}

}  // namespace eddy::detail
