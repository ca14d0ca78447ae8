// tools/no_io_uring.cpp: no-io-uring [--errno NAME] COMMAND [ARG...]
//
// Runs COMMAND the way a default container runs it as far as io_uring goes: a seccomp filter
// makes io_uring_setup(2), io_uring_enter(2) and io_uring_register(2) fail with EPERM and
// allows every other system call. Docker 25 and later, containerd 2.0's RuntimeDefault
// (what a Kubernetes pod gets) and Android install such a rule; a host can get the same
// answer from io_uring_setup with the kernel.io_uring_disabled sysctl. --errno ENOSYS
// answers as a kernel without io_uring does instead (the other names: EPERM, EACCES).
//
// The filter is inherited by every thread and process COMMAND starts, and cannot be lifted
// (PR_SET_NO_NEW_PRIVS is set first, as an unprivileged seccomp filter requires: set-user-ID
// programs run without their privileges under it). Exit status: COMMAND's own; 125 when the
// filter cannot be installed, 126 when COMMAND cannot be run, 127 when it is not found (as
// env(1) does), 2 on a usage error.
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string_view>

namespace {

constexpr int kUsage = 2;
constexpr int kNoFilter = 125;
constexpr int kCannotRun = 126;
constexpr int kNotFound = 127;

int usage(const char* why) {
    std::fprintf(stderr,
                 "no-io-uring: %s\n"
                 "usage: no-io-uring [--errno EPERM|EACCES|ENOSYS] COMMAND [ARG...]\n"
                 "Runs COMMAND with io_uring_setup, io_uring_enter and io_uring_register refused (EPERM by\n"
                 "default), as Docker's and Kubernetes' default seccomp profiles refuse them.\n",
                 why);
    return kUsage;
}

/// Refuses the three io_uring calls with `err` for this thread and all it starts, for good.
bool refuse_io_uring(int err) {
    const unsigned refuse = SECCOMP_RET_ERRNO | (static_cast<unsigned>(err) & SECCOMP_RET_DATA);
    // The three calls have the same numbers in every Linux ABI since 5.1 (425-427: one
    // table for all architectures), so no architecture check is needed: a 32-bit program
    // is refused them too, as a container profile's per-architecture tables refuse them.
    // x86-64's x32 ABI numbers its calls with __X32_SYSCALL_BIT set: that bit is masked
    // off first, so that they are refused there as well.
    static_assert(__NR_io_uring_setup == 425 && __NR_io_uring_enter == 426 && __NR_io_uring_register == 427);
    constexpr unsigned kX32Bit = 0x40000000;
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_STMT(BPF_ALU | BPF_AND | BPF_K, ~kX32Bit),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 425, 0, 2),  // nr < 425: allow
        BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, 427, 1, 0),  // nr > 427: allow
        BPF_STMT(BPF_RET | BPF_K, refuse),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
    return ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

}  // namespace

int main(int argc, char** argv) {
    int err = EPERM;
    int first = 1;
    if (first < argc && std::string_view(argv[first]) == "--errno") {
        if (first + 1 >= argc) return usage("--errno needs a name");
        const std::string_view name = argv[first + 1];
        if (name == "EPERM") err = EPERM;
        else if (name == "EACCES") err = EACCES;
        else if (name == "ENOSYS") err = ENOSYS;
        else return usage("--errno takes EPERM, EACCES or ENOSYS");
        first += 2;
    }
    if (first < argc && std::string_view(argv[first]) == "--") ++first;
    if (first >= argc) return usage("no command given");
    if (argv[first][0] == '-') return usage("unknown option (a command's name cannot start with '-')");
    if (!refuse_io_uring(err)) {
        std::fprintf(stderr, "no-io-uring: installing the seccomp filter failed: %s\n", std::strerror(errno));
        return kNoFilter;
    }
    ::execvp(argv[first], argv + first);
    const int why = errno;
    std::fprintf(stderr, "no-io-uring: %s: %s\n", argv[first], std::strerror(why));
    return why == ENOENT ? kNotFound : kCannotRun;
}
