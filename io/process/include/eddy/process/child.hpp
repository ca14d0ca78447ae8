//! eddy/process/child.hpp: process::Child, a running child process, and process::ExitStatus,
//! how it ended. Made by process::Command::spawn (eddy/process/command.hpp).
//!
//!     eddy::process::Child child = cmd.spawn();
//!     co_await eddy::io::write_all(*child.stdin, request);
//!     child.stdin.reset();                                   // the child sees end of file
//!     eddy::process::ExitStatus st = co_await child.wait();  // st.code(), st.signal()
//!
//! Waiting takes no thread: the child is held by a pidfd (pidfd_open, Linux 5.3). wait()
//! hands the kernel one IORING_OP_WAITID (P_PIDFD) where the reactor's ring has it (Linux
//! 6.7+); elsewhere it polls the pidfd for readability through the reactor and reaps with
//! waitid(P_PIDFD, WNOHANG) (Linux 5.4). Signals go through pidfd_send_signal (Linux 5.1),
//! so they never reach a process that reused the child's pid. Linux 6.1 (Debian 12) has all
//! the fallback needs.
//!
//! Errors: std::system_error with the errno (ECHILD when something else reaped the child,
//! e.g. a SIGCHLD set to SIG_IGN or a waitpid(-1) elsewhere in the program). Cancellation:
//! a wait() cancelled through its token or the task's cancellation throws
//! eddy::OperationCancelled and reaps nothing: the child can be waited for again.
//!
//! One task at a time may call wait(), try_wait(), kill() or signal() on a Child; the three
//! streams are independent (one task may write stdin while another reads stdout).
//!
//! Dropping a Child that has not been waited for (Tokio's default): the child keeps running
//! (unless Command::kill_on_drop(true), which sends it SIGKILL) and is reaped in the
//! background, so it does not stay a zombie: on a runtime worker, by a detached task waiting
//! on its pidfd; elsewhere, or when that task is dropped at runtime shutdown, a killed child
//! is reaped there as it dies (waited for up to a second), any other by the next
//! Command::spawn of the process, which reaps every such orphan that has exited.
//! @file
#pragma once

#include <sys/types.h>

#include <csignal>  // SIGKILL, SIGTERM... for signal() and ExitStatus::signal()
#include <optional>
#include <stop_token>

#include <eddy/io/descriptor_stream.hpp>
#include <eddy/io/file_descriptor.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::process {

/// How a child process ended: exited with a code, or killed by a signal.
class ExitStatus {
public:
    /// An exit with `code` (0 to 255).
    static ExitStatus exited(int code) noexcept { return ExitStatus(code, 0, false); }
    /// A death by signal `sig`, with a core dump when `core_dumped`.
    static ExitStatus signaled(int sig, bool core_dumped = false) noexcept { return ExitStatus(-1, sig, core_dumped); }

    /// The exit code, or std::nullopt when a signal ended the process.
    std::optional<int> code() const noexcept { return code_ >= 0 ? std::optional<int>(code_) : std::nullopt; }
    /// The signal that ended the process, or std::nullopt when it exited.
    std::optional<int> signal() const noexcept { return signal_ > 0 ? std::optional<int>(signal_) : std::nullopt; }
    /// Whether the process exited with code 0.
    bool success() const noexcept { return code_ == 0; }
    /// Whether a signal ended it with a core dump.
    bool core_dumped() const noexcept { return core_; }
    /// Same code, signal and core dump.
    friend bool operator==(const ExitStatus&, const ExitStatus&) = default;

private:
    ExitStatus(int code, int sig, bool core) noexcept : code_(code), signal_(sig), core_(core) {}
    int code_;
    int signal_;
    bool core_;
};

/// A spawned child process (see the file comment). Move-only.
class Child {
public:
    /// The write end of the child's standard input, when Command::stdin(Stdio::piped()).
    /// Reset (close) it to give the child end of file.
    std::optional<io::DescriptorStream> stdin;
    /// The read end of the child's standard output, when Command::stdout(Stdio::piped()).
    std::optional<io::DescriptorStream> stdout;
    /// The read end of the child's standard error, when Command::stderr(Stdio::piped()).
    std::optional<io::DescriptorStream> stderr;

    /// Takes over the process `pid` held by `pidfd` (made by Command::spawn).
    Child(pid_t pid, io::FileDescriptor pidfd, bool kill_on_drop) noexcept
        : pid_(pid), pidfd_(std::move(pidfd)), kill_on_drop_(kill_on_drop) {}
    /// Takes `other`'s process and streams; `other` is left without a process.
    Child(Child&& other) noexcept = default;
    /// Drops this child (as the destructor does), then takes `other`'s.
    Child& operator=(Child&& other) noexcept;
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;
    /// Drops the child: see the file comment (kill_on_drop, background reaping).
    ~Child();

    /// The child's process id (as it was at spawn; meaningless once it has been reaped).
    pid_t id() const noexcept { return pid_; }

    /// `co_await child.wait()`: closes stdin (as Tokio does, so a child reading it can
    /// finish), then waits for the child to end and reaps it; again after that, the same
    /// status at once. Throws eddy::OperationCancelled when cancelled (the child stays
    /// waitable), std::system_error (ECHILD) if something else reaped it. The Child must
    /// outlive the await.
    [[nodiscard]] Task<ExitStatus> wait(std::stop_token token = {});
    /// The status if the child has ended (reaping it), else std::nullopt; never blocks.
    /// Throws std::system_error as wait() does.
    std::optional<ExitStatus> try_wait();
    /// Sends SIGKILL (Tokio's start_kill); `co_await wait()` then reaps it. A no-op once the
    /// child has been reaped. Throws std::system_error if the signal cannot be sent.
    void kill();
    /// Sends signal `sig`; a no-op once the child has been reaped. Throws std::system_error
    /// (EINVAL for a number that is not a signal).
    void signal(int sig);

private:
    void drop() noexcept;
    pid_t pid_ = -1;
    io::FileDescriptor pidfd_;
    std::optional<ExitStatus> status_;
    bool kill_on_drop_ = false;
};

}  // namespace eddy::process
