// io/process/orphans.hpp: the children dropped before they were reaped, and reaping.
#pragma once
#include "private.hpp"

#include <signal.h>

#include <optional>
#include <utility>

#include <eddy/io/file_descriptor.hpp>
#include <eddy/process/child.hpp>

namespace eddy::process::detail {

/// waitid(P_PIDFD, WEXITED | WNOHANG): the status if the child has ended (reaped now), else
/// std::nullopt. Throws std::system_error (`what`, the errno: ECHILD) on failure.
std::optional<ExitStatus> reap(int pidfd, const char* what);

/// The ExitStatus a waitid() reported in `info` (si_pid not 0).
ExitStatus status_of(const siginfo_t& info) noexcept;

/// Tests only: `true` makes Child::wait() poll the pidfd even where the ring has
/// IORING_OP_WAITID, so that both ways run on one machine; `false` (the default) undoes it.
void force_pidfd_poll(bool on) noexcept;
/// Whether Child::wait() on the calling worker waits with IORING_OP_WAITID (not forced off,
/// and the runtime's ring has it). Throws eddy::WrongThread off a worker.
bool waits_with_waitid();

/// Keeps `pidfd` (a dropped child) until a later reap_orphans() finds it ended. A child sent
/// SIGKILL (`killed`: kill_on_drop) is waited for here first, up to kKilledWait, and reaped
/// then: it dies at once unless the kernel holds it in an uninterruptible wait, so a runtime's
/// shutdown leaves no zombie of it behind for the next spawn to find.
void adopt_orphan(io::FileDescriptor pidfd, bool killed = false) noexcept;

/// How long adopt_orphan() waits for a killed child to end (then the list keeps it).
inline constexpr int kKilledWaitMs = 1000;

/// Reaps every adopted child that has ended; called by each Command::spawn.
void reap_orphans() noexcept;

/// Owns the pidfd of a dropped child; unless done() was called, its destructor hands the
/// pidfd to the orphan list. Move-only: a moved-from guard holds nothing.
class OrphanGuard {
public:
    /// `killed`: the child was sent SIGKILL (adopt_orphan).
    OrphanGuard(io::FileDescriptor pidfd, bool killed) noexcept : fd_(std::move(pidfd)), killed_(killed) {}
    OrphanGuard(OrphanGuard&&) noexcept = default;
    OrphanGuard& operator=(OrphanGuard&&) = delete;
    ~OrphanGuard() {
        if (fd_) adopt_orphan(std::move(fd_), killed_);
    }
    int fd() const noexcept { return fd_.get(); }
    /// The child is reaped: the destructor just closes the pidfd.
    void done() noexcept { fd_ = io::FileDescriptor(); }

private:
    io::FileDescriptor fd_;
    bool killed_ = false;
};

}  // namespace eddy::process::detail
