// io/process/orphans.hpp: the children dropped before they were reaped, and reaping.
#pragma once
#include "private.hpp"

#include <optional>
#include <utility>

#include <eddy/io/file_descriptor.hpp>
#include <eddy/process/child.hpp>

namespace eddy::process::detail {

/// waitid(P_PIDFD, WEXITED | WNOHANG): the status if the child has ended (reaped now), else
/// std::nullopt. Throws std::system_error (`what`, the errno: ECHILD) on failure.
std::optional<ExitStatus> reap(int pidfd, const char* what);

/// Keeps `pidfd` (a dropped child) until a later reap_orphans() finds it ended.
void adopt_orphan(io::FileDescriptor pidfd) noexcept;

/// Reaps every adopted child that has ended; called by each Command::spawn.
void reap_orphans() noexcept;

/// Owns the pidfd of a dropped child; unless done() was called, its destructor hands the
/// pidfd to the orphan list. Move-only: a moved-from guard holds nothing.
class OrphanGuard {
public:
    explicit OrphanGuard(io::FileDescriptor pidfd) noexcept : fd_(std::move(pidfd)) {}
    OrphanGuard(OrphanGuard&&) noexcept = default;
    OrphanGuard& operator=(OrphanGuard&&) = delete;
    ~OrphanGuard() {
        if (fd_) adopt_orphan(std::move(fd_));
    }
    int fd() const noexcept { return fd_.get(); }
    /// The child is reaped: the destructor just closes the pidfd.
    void done() noexcept { fd_ = io::FileDescriptor(); }

private:
    io::FileDescriptor fd_;
};

}  // namespace eddy::process::detail
