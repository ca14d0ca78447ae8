// io/process/child.cpp: waiting for, signalling and dropping a child held by its pidfd.
#include <eddy/process/child.hpp>

#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>
#include <system_error>
#include <utility>

#include <eddy/io/detail/io_awaiter.hpp>
#include <eddy/io/readiness.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/this_worker.hpp>

#include "process/orphans.hpp"

namespace eddy::process {

namespace detail {

namespace {
std::atomic<bool> pidfd_poll_forced{false};
}  // namespace

void force_pidfd_poll(bool on) noexcept { pidfd_poll_forced.store(on, std::memory_order_relaxed); }

bool waits_with_waitid() {
    return !pidfd_poll_forced.load(std::memory_order_relaxed) &&
           eddy::detail::reactor_has_waitid(eddy::detail::current_reactor("eddy::process::Child::wait"));
}

std::optional<ExitStatus> reap(int pidfd, const char* what) {
    siginfo_t info{};
    if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info, WEXITED | WNOHANG) != 0)
        throw std::system_error(errno, std::system_category(), what);
    if (info.si_pid == 0) return std::nullopt;  // still running
    return status_of(info);
}

ExitStatus status_of(const siginfo_t& info) noexcept {
    switch (info.si_code) {
    case CLD_EXITED:
        return ExitStatus::exited(info.si_status);
    case CLD_DUMPED:
        return ExitStatus::signaled(info.si_status, true);
    default:
        return ExitStatus::signaled(info.si_status);
    }
}

}  // namespace detail

namespace {

int send_signal(int pidfd, int sig) noexcept {
    return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0U));
}

/// Waits on the pidfd of a dropped child and reaps it. Hands the pidfd to the orphan list if
/// it is destroyed before that (the runtime shutting down).
Task<void> reap_in_background(detail::OrphanGuard guard) {
    for (;;) {
        try {
            if (detail::reap(guard.fd(), "eddy::process::Child: reaping a dropped child")) break;
        } catch (const std::system_error&) {
            break;  // ECHILD: reaped elsewhere; nothing left to do
        }
        co_await io::readable(guard.fd());
    }
    guard.done();
}

}  // namespace

Child& Child::operator=(Child&& other) noexcept {
    if (this != &other) {
        drop();
        stdin = std::move(other.stdin);
        stdout = std::move(other.stdout);
        stderr = std::move(other.stderr);
        pid_ = other.pid_;
        pidfd_ = std::move(other.pidfd_);
        status_ = other.status_;
        kill_on_drop_ = other.kill_on_drop_;
    }
    return *this;
}

Child::~Child() { drop(); }

void Child::drop() noexcept {
    if (!pidfd_ || status_) {
        pidfd_ = io::FileDescriptor();
        return;
    }
    if (kill_on_drop_) send_signal(pidfd_.get(), SIGKILL);
    try {
        if (detail::reap(pidfd_.get(), "eddy::process::Child")) {
            pidfd_ = io::FileDescriptor();
            return;
        }
    } catch (const std::system_error&) {
        pidfd_ = io::FileDescriptor();  // ECHILD: nothing to reap
        return;
    }
    if (this_worker::index()) {
        try {
            // If the task never runs (the runtime is stopping), its frame's guard hands the
            // pidfd to the orphan list.
            (void)eddy::spawn(reap_in_background(detail::OrphanGuard(std::move(pidfd_), kill_on_drop_)));
            return;
        } catch (...) {
            if (!pidfd_) return;  // the guard has it (and gave it to the orphan list)
        }
    }
    detail::adopt_orphan(std::move(pidfd_), kill_on_drop_);
}

Task<ExitStatus> Child::wait(std::stop_token token) {
    stdin.reset();
    if (status_) co_return *status_;
    if (pidfd_ && detail::waits_with_waitid()) {
        // Linux 6.7+: the kernel reaps the child when it ends and completes the operation
        // once. Cancelled, it reaps nothing (the child stays waitable). `info` lives in this
        // frame until the completion, cancelled or not.
        siginfo_t info{};
        (void)co_await eddy::detail::IoAwaiter(
            eddy::detail::IoRequest{
                .kind = eddy::detail::IoKind::kWaitId, .fd = pidfd_.get(), .addr = &info, .flags = WEXITED},
            "eddy::process::Child::wait: waitid", token);
        if (info.si_pid != 0) {
            status_ = detail::status_of(info);
            co_return *status_;
        }
        // Nothing reaped (a kernel that treated the wait as WNOHANG): poll as below.
    }
    for (;;) {
        if (auto st = try_wait()) co_return *st;
        co_await io::readable(pidfd_.get(), token);
    }
}

std::optional<ExitStatus> Child::try_wait() {
    if (status_) return status_;
    if (!pidfd_) throw std::system_error(EBADF, std::system_category(), "eddy::process::Child::try_wait: no process");
    status_ = detail::reap(pidfd_.get(), "eddy::process::Child::try_wait");
    return status_;
}

void Child::kill() { signal(SIGKILL); }

void Child::signal(int sig) {
    if (status_) return;
    if (!pidfd_) throw std::system_error(EBADF, std::system_category(), "eddy::process::Child::signal: no process");
    if (send_signal(pidfd_.get(), sig) != 0 && errno != ESRCH)
        throw std::system_error(errno, std::system_category(),
                                "eddy::process::Child::signal: pidfd_send_signal(" + std::to_string(sig) + ")");
}

}  // namespace eddy::process
