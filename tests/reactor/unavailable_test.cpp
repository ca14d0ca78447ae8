// tests/reactor/unavailable_test.cpp: what a Runtime does where io_uring is refused.
//
// A forked child installs a seccomp filter that makes io_uring_setup(2) fail with a chosen
// errno (ENOSYS: "no such system call", as on an old kernel or under a container profile;
// EPERM: "not allowed", as with kernel.io_uring_disabled), then constructs a Runtime:
//   - with RuntimeConfig::driver io_uring, it must throw std::system_error carrying that
//     errno and saying "io_uring is unavailable", and must not leave threads or descriptors
//     behind to hang the child (a second construction behaves the same);
//   - with the default (automatic), it must fall back to the readiness driver: metrics name
//     epoll and say why, and a task's timer and a pipe's readiness work on it.
// The child reports by exit code; the parent asserts. (This executable links io_main, whose
// probe runs in the parent where io_uring works, so the test itself is not skipped.)
#include <doctest/doctest.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <chrono>
#include <exception>
#include <string>
#include <string_view>
#include <system_error>

#include <eddy/io/readiness.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/tasks/task.hpp>
#include <eddy/time/sleep.hpp>

namespace {

#if defined(__x86_64__)
constexpr unsigned kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr unsigned kAuditArch = AUDIT_ARCH_AARCH64;
#else
#error "unavailable_test.cpp: add this architecture's AUDIT_ARCH_* constant"
#endif

// The child's exit codes.
enum ChildExit : int {
    kOk = 0,
    kNoThrow = 1,
    kWrongMessage = 2,
    kWrongCode = 3,
    kOtherException = 4,
    kSeccompFailed = 5,
    kSecondTryDiffers = 6,
    kWrongDriver = 7,
    kIoFailed = 8,
};

/// Makes io_uring_setup fail with `err` for this thread and every thread it starts later.
bool block_io_uring_setup(int err) {
    sock_filter filter[] = {
        // Another architecture's system call numbers mean something else: refuse those too.
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<unsigned>(err) & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<unsigned>(err) & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
    return ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

/// In the child: one Runtime construction under the filter with io_uring required, classified.
int try_runtime(int err) {
    try {
        eddy::Runtime rt(eddy::RuntimeConfig{.workers = 2, .driver = eddy::IoDriver::io_uring});
        return kNoThrow;
    } catch (const std::system_error& e) {
        if (std::string_view(e.what()).find("io_uring is unavailable") == std::string_view::npos) {
            std::fprintf(stderr, "child: unexpected message: %s\n", e.what());
            return kWrongMessage;
        }
        // The errno itself, and the portable condition a caller would compare with.
        if (e.code() != std::error_code(err, std::system_category()) ||
            e.code() != std::make_error_condition(static_cast<std::errc>(err))) {
            std::fprintf(stderr, "child: unexpected code %d (%s): %s\n", e.code().value(), e.code().category().name(),
                         e.what());
            return kWrongCode;
        }
        return kOk;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "child: unexpected exception: %s\n", e.what());
        return kOtherException;
    } catch (...) {
        return kOtherException;
    }
}

eddy::Task<int> read_a_pipe_after_a_sleep() {
    int fds[2];
    if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) co_return -1;
    co_await eddy::sleep(std::chrono::milliseconds(1));
    const char byte = 'x';
    if (::write(fds[1], &byte, 1) != 1) co_return -1;
    const unsigned revents = co_await eddy::io::readable(fds[0]);
    ::close(fds[0]);
    ::close(fds[1]);
    co_return static_cast<int>(revents);
}

/// In the child: the default driver under the filter falls back to epoll, and works.
int try_fallback(int err) {
    try {
        eddy::Runtime rt(eddy::RuntimeConfig{.workers = 2});
        const eddy::ReactorMetrics m = rt.metrics().reactor;
        if (m.driver != eddy::IoDriver::epoll || m.driver_note.find("io_uring is unavailable") == std::string::npos) {
            std::fprintf(stderr, "child: driver %d, note '%s'\n", static_cast<int>(m.driver), m.driver_note.c_str());
            return kWrongDriver;
        }
        (void)err;
        return (rt.block_on(read_a_pipe_after_a_sleep()) & POLLIN) != 0 ? kOk : kIoFailed;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "child: unexpected exception: %s\n", e.what());
        return kOtherException;
    }
}

/// Forks a child that blocks io_uring_setup with `err` and runs `body` under the filter;
/// returns its exit code.
int run_child(int err, int (*body)(int)) {
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        if (!block_io_uring_setup(err)) ::_exit(kSeccompFailed);
        ::_exit(body(err));
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    REQUIRE(WIFEXITED(status));
    return WEXITSTATUS(status);
}

}  // namespace

TEST_SUITE("reactor/unavailable") {

/// Twice: a failed construction must leave nothing behind that breaks the next one.
int throws_twice(int err) {
    const int first = try_runtime(err);
    if (first != kOk) return first;
    return try_runtime(err) == kOk ? kOk : kSecondTryDiffers;
}

TEST_CASE("io_uring required, io_uring_setup failing with ENOSYS: the constructor throws system_error(ENOSYS)") {
    CHECK(run_child(ENOSYS, throws_twice) == kOk);
}

TEST_CASE("io_uring required, io_uring_setup failing with EPERM: the constructor throws system_error(EPERM)") {
    CHECK(run_child(EPERM, throws_twice) == kOk);
}

TEST_CASE("the default driver falls back to epoll where io_uring_setup fails with EPERM or ENOSYS, and says why") {
    CHECK(run_child(EPERM, try_fallback) == kOk);
    CHECK(run_child(ENOSYS, try_fallback) == kOk);
}

TEST_CASE("outside the filter, io_uring works here (so the cases above tested the filter)") {
    CHECK_NOTHROW(eddy::Runtime(eddy::RuntimeConfig{.workers = 1}));
}

}  // TEST_SUITE("reactor/unavailable")
