//! eddy/io/signal.hpp: io::SignalSet, POSIX signals received by a task through the reactor.
//!
//!     int main() {
//!         eddy::io::SignalSet signals{SIGINT, SIGTERM};    // first: before the Runtime
//!         eddy::Runtime rt;
//!         rt.block_on([&]() -> eddy::Task<void> {
//!             int sig = co_await signals.wait();          // SIGINT or SIGTERM
//!             ...
//!         }());
//!     }
//!
//! The constructor blocks the signals in the calling thread (pthread_sigmask) and opens a
//! signalfd for them; wait() reads one `signalfd_siginfo` from it through the reactor and
//! gives the signal's number.
//!
//! **Construct it before the Runtime**, on the thread that creates the Runtime. Threads
//! inherit the signal mask of the thread that creates them, so the workers and the reactor
//! thread then block the signals too. A signal delivered to a thread that does not block it
//! takes its default action there (SIGINT and SIGTERM end the process) and never reaches the
//! signalfd. For the same reason, a program should start no other thread before it.
//!
//! What is received: process-directed signals (kill(2), `kill` from a shell, Ctrl-C at a
//! terminal, a supervisor's SIGTERM). A signal sent to one particular thread (pthread_kill,
//! raise) is pending for that thread only and is seen only by a read on that thread, so it
//! may never be received here. Standard signals do not queue: the same signal sent twice
//! before it is read is received once. Several tasks may wait at once; each signal wakes one.
//!
//! Cancellation: a stop requested on wait()'s `token`, or the cancellation of the awaiting
//! task (eddy/tasks/cancellation.hpp), ends a pending wait with eddy::OperationCancelled; no
//! signal is consumed by a cancelled wait.
//!
//! The destructor closes the signalfd. It leaves the signals blocked (it could unblock them
//! only in the thread it runs on, and the Runtime's threads keep their mask anyway): a signal
//! that arrives later stays pending and is ignored instead of killing a process that is
//! shutting down. No wait may be pending when the set is destroyed or moved from.
//! @file
#pragma once

#include <initializer_list>
#include <span>
#include <stop_token>

#include <eddy/io/file_descriptor.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::io {

/// POSIX signals received by a task through the reactor (see the file comment). Move-only.
class SignalSet {
public:
    /// Blocks `signals` in the calling thread and opens a signalfd (close-on-exec,
    /// non-blocking) for them. Throws std::invalid_argument for an empty list, a number that
    /// is not a signal (0, negative, above SIGRTMAX) or one that cannot be caught (SIGKILL,
    /// SIGSTOP); std::system_error (e.g. EMFILE) if the mask or the signalfd cannot be set
    /// up, with the calling thread's mask restored.
    explicit SignalSet(std::span<const int> signals);
    /// SignalSet(std::span): the same, from a list such as `{SIGINT, SIGTERM}`.
    explicit SignalSet(std::initializer_list<int> signals)
        : SignalSet(std::span<const int>(signals.begin(), signals.size())) {}

    /// Moves the set; `other` is left empty. No wait may be pending on `other`.
    SignalSet(SignalSet&&) noexcept = default;
    /// Closes this set's signalfd (its signals stay blocked: see the file comment), then
    /// takes `other`'s. No wait may be pending on either.
    SignalSet& operator=(SignalSet&&) noexcept = default;
    SignalSet(const SignalSet&) = delete;
    SignalSet& operator=(const SignalSet&) = delete;
    ~SignalSet() = default;

    /// `co_await set.wait()`: the number of the next signal of the set (one already pending
    /// is received at once). Throws eddy::OperationCancelled when cancelled through `token`
    /// or the awaiting task's cancellation, std::system_error if the read fails (EBADF on a
    /// moved-from set). The set must outlive the await.
    [[nodiscard]] Task<int> wait(std::stop_token token = {});

    /// The signalfd (-1 in a moved-from set).
    int fd() const noexcept { return fd_.get(); }

private:
    FileDescriptor fd_;
};

}  // namespace eddy::io
