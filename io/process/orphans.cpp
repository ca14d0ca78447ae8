// io/process/orphans.cpp: the orphan list, a last resort for dropped children that no
// background task waits for (dropped off a runtime, or at its shutdown).
#include "process/orphans.hpp"

#include <poll.h>

#include <mutex>
#include <system_error>
#include <vector>

namespace eddy::process::detail {

namespace {

std::mutex orphans_mutex;
std::vector<io::FileDescriptor> orphans;  // guarded by orphans_mutex

}  // namespace

void adopt_orphan(io::FileDescriptor pidfd, bool killed) noexcept {
    if (killed) {
        // The pidfd becomes readable when the child exits; EINTR just ends the wait early.
        pollfd p{pidfd.get(), POLLIN, 0};
        if (::poll(&p, 1, kKilledWaitMs) > 0) {
            try {
                if (reap(pidfd.get(), "eddy::process: reaping a killed child")) return;
            } catch (const std::system_error&) {
                return;  // ECHILD: reaped elsewhere
            }
        }
    }
    try {
        const std::lock_guard lock(orphans_mutex);
        orphans.push_back(std::move(pidfd));
    } catch (...) {
        // Out of memory: the descriptor closes here and the child stays a zombie until this
        // process exits, the one case left without a reaper.
    }
}

void reap_orphans() noexcept {
    const std::lock_guard lock(orphans_mutex);
    std::erase_if(orphans, [](const io::FileDescriptor& fd) {
        try {
            return reap(fd.get(), "eddy::process: reaping an orphan").has_value();
        } catch (const std::system_error&) {
            return true;  // ECHILD: reaped elsewhere
        }
    });
}

}  // namespace eddy::process::detail
