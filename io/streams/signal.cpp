// io/streams/signal.cpp
#include <eddy/io/signal.hpp>

#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>

#include <cerrno>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <system_error>

#include <eddy/io/detail/io_awaiter.hpp>

namespace eddy::io {

namespace {

sigset_t mask_of(std::span<const int> signals) {
    if (signals.empty()) throw std::invalid_argument("eddy::io::SignalSet: no signals given");
    sigset_t mask;
    sigemptyset(&mask);
    for (const int sig : signals) {
        if (sig == SIGKILL || sig == SIGSTOP)
            throw std::invalid_argument("eddy::io::SignalSet: signal " + std::to_string(sig) +
                                        " (SIGKILL or SIGSTOP) cannot be caught");
        if (sig < 1 || sig > SIGRTMAX || sigaddset(&mask, sig) != 0)
            throw std::invalid_argument("eddy::io::SignalSet: " + std::to_string(sig) +
                                        " is not a signal number (1 to " + std::to_string(SIGRTMAX) + ")");
    }
    return mask;
}

}  // namespace

SignalSet::SignalSet(std::span<const int> signals) {
    const sigset_t mask = mask_of(signals);
    sigset_t old;
    if (const int err = ::pthread_sigmask(SIG_BLOCK, &mask, &old); err != 0)
        throw std::system_error(err, std::system_category(), "eddy::io::SignalSet: pthread_sigmask");
    // Non-blocking: a read with nothing pending is turned into a readiness poll by the
    // reactor (or io_uring itself) and retried, instead of occupying a kernel worker thread.
    const int fd = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd < 0) {
        const int err = errno;
        ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
        throw std::system_error(err, std::system_category(), "eddy::io::SignalSet: signalfd");
    }
    fd_ = FileDescriptor(fd);
}

Task<int> SignalSet::wait(std::stop_token token) {
    signalfd_siginfo info{};
    const std::size_t n =
        co_await detail::IoAwaiter({.kind = detail::IoKind::kRead, .fd = fd_.get(), .addr = &info, .len = sizeof info},
                                   "eddy::io::SignalSet::wait", std::move(token));
    // The kernel hands out whole records only; a short read would be a kernel bug.
    if (n != sizeof info)
        throw std::system_error(std::make_error_code(std::errc::io_error), "eddy::io::SignalSet::wait: short read");
    co_return static_cast<int>(info.ssi_signo);
}

}  // namespace eddy::io
