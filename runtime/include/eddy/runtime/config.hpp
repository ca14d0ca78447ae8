// eddy/runtime/config.hpp: RuntimeConfig, how a Runtime is sized and wired.
#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <optional>

namespace eddy {

struct RuntimeConfig {
    /// Worker threads. Unset: the CPUs this process may use (affinity mask and cgroup CPU
    /// quota respected). The environment variable EDDY_WORKERS, when set, overrides both;
    /// a bad value there (or 0 here) makes the Runtime constructor throw
    /// std::invalid_argument naming the setting.
    std::optional<std::size_t> workers{};

    /// Submission queue entries of the reactor's io_uring ring (1..32768, rounded up to a
    /// power of two by the kernel; the completion queue gets four times as many). More
    /// operations than this may be in flight: a full queue is submitted and refilled. A
    /// value out of range makes the Runtime constructor throw std::invalid_argument.
    unsigned ring_entries = 1024;

    /// Called on a worker thread with an exception that escaped a task nobody will observe:
    /// a detached task (its JoinHandle dropped before it finished), or a finished task whose
    /// JoinHandle was dropped without being awaited. Unset: one line on stderr. It must not
    /// throw; the process is never terminated because of such an exception.
    std::function<void(std::exception_ptr)> on_unhandled_exception{};
};

} // namespace eddy
