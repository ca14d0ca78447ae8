// eddy/runtime/io_driver.hpp: which kernel interface a runtime's reactor thread drives
// (RuntimeConfig::driver, ReactorMetrics::driver).
#pragma once

#include <string_view>

namespace eddy {

/// The kernel interface a runtime's reactor thread drives (RuntimeConfig::driver; the
/// driver in use is ReactorMetrics::driver).
enum class IoDriver {
    /// io_uring, and where the kernel refuses it (io_uring_setup fails with EPERM, EACCES or
    /// ENOSYS: a container's seccomp profile, kernel.io_uring_disabled, an old kernel) the
    /// readiness driver, saying why once on stderr and in ReactorMetrics::driver_note.
    automatic,
    io_uring,  ///< io_uring only: the Runtime constructor throws std::system_error where it is refused
    epoll,     ///< the readiness driver (epoll, eventfd; files on the reactor's own threads)
};

/// "auto", "io_uring" or "epoll": the name EDDY_DRIVER takes.
constexpr std::string_view to_string(IoDriver d) noexcept {
    switch (d) {
    case IoDriver::automatic:
        return "auto";
    case IoDriver::io_uring:
        return "io_uring";
    case IoDriver::epoll:
        return "epoll";
    }
    return "?";
}

}  // namespace eddy
