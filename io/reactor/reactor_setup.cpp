// io/reactor/reactor_setup.cpp: the reactor's ring, its wake-up eventfd and its thread (reactor.hpp),
// and the clear error when io_uring cannot be set up.
#include "reactor/reactor.hpp"

#include "reactor/epoll_state.hpp"
#include "time/timer_queue.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>

namespace eddy::detail {
namespace {

[[noreturn]] void throw_unavailable(int err) {
    std::string why;
    switch (err) {
    case ENOSYS:
        why = "the kernel has no io_uring (too old, or built without it) or a seccomp filter blocks it";
        break;
    case EPERM:
    case EACCES: {
        std::ifstream f("/proc/sys/kernel/io_uring_disabled");
        int disabled = 0;
        if (f >> disabled && disabled != 0)
            why = "kernel.io_uring_disabled is " + std::to_string(disabled) + " (sysctl)";
        else why = "permission denied (a seccomp filter or security policy blocks io_uring_setup)";
        break;
    }
    case ENOMEM: {
        rlimit rl{};
        getrlimit(RLIMIT_MEMLOCK, &rl);
        why = "not enough lockable memory for the rings (RLIMIT_MEMLOCK is " +
              (rl.rlim_cur == RLIM_INFINITY ? std::string("unlimited") : std::to_string(rl.rlim_cur) + " bytes") +
              "; raise it or lower RuntimeConfig::ring_entries)";
        break;
    }
    default:
        why = "io_uring_setup failed";
    }
    throw std::system_error(err, std::system_category(), "eddy: io_uring is unavailable: " + why);
}

}  // namespace

Reactor::Reactor(DriverHost& host, unsigned ring_entries)
    : host_(host), virtual_(host.clock_is_virtual()), time_io_(host.config().io_latency_histogram) {
    constexpr unsigned kMaxCqEntries = 65536;  // the kernel's limit (IORING_MAX_CQ_ENTRIES)
    const unsigned cq_entries = ring_entries < kMaxCqEntries / 4 ? ring_entries * 4 : kMaxCqEntries;
    // A CQ four times the SQ (at most the kernel's maximum): completions of earlier batches
    // can pile up while new ones are submitted. The ring is tried with the newest flags
    // first, then without what an older kernel rejects (-EINVAL):
    //   DEFER_TASKRUN + SINGLE_ISSUER (6.1+): completion work runs only when the reactor
    //     enters the kernel to wait, in one batch, instead of interrupting it each time; the
    //     ring starts disabled (R_DISABLED) so that the reactor thread, which enables it,
    //     becomes its single issuer.
    //   COOP_TASKRUN (5.19+): the same without the deferral.
    //   TASKRUN_FLAG with either: the kernel sets IORING_SQ_TASKRUN while completion work
    //     waits for us, which workers read to decide whether waking us pays (events_pending()).
    const unsigned attempts[] = {
        IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_R_DISABLED | IORING_SETUP_TASKRUN_FLAG,
        IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
        0,
    };
    io_uring_params params{};
    int r = -EINVAL;
    for (unsigned flags : attempts) {
        params = io_uring_params{};
        params.flags = IORING_SETUP_CQSIZE | flags;
        params.cq_entries = cq_entries;
        // At least 2: an operation under a deadline takes two adjacent SQEs (link_timeout.cpp).
        r = io_uring_queue_init_params(std::max(ring_entries, 2u), &ring_, &params);
        if (r != -EINVAL) break;
    }
    disabled_ = (params.flags & IORING_SETUP_R_DISABLED) != 0;
    taskrun_flag_ = (params.flags & IORING_SETUP_TASKRUN_FLAG) != 0;
    if (r < 0) throw_unavailable(-r);
    if ((params.features & IORING_FEAT_NODROP) == 0 || (params.features & IORING_FEAT_EXT_ARG) == 0) {
        io_uring_queue_exit(&ring_);
        throw std::system_error(ENOSYS, std::system_category(),
                                "eddy: io_uring is unavailable: the kernel lacks IORING_FEAT_NODROP or "
                                "IORING_FEAT_EXT_ARG (eddy needs Linux 5.11 or later)");
    }
    // IORING_OP_WAITID (Linux 6.7): process::Child::wait() uses it where the ring has it and
    // polls the child's pidfd otherwise. A failed probe counts as "no".
    if (io_uring_probe* probe = io_uring_get_probe_ring(&ring_)) {
        waitid_ = io_uring_opcode_supported(probe, kOpWaitId) != 0;
        io_uring_free_probe(probe);
    }
    event_fd_ = eventfd(0, EFD_CLOEXEC);
    if (event_fd_ < 0) {
        const int err = errno;
        io_uring_queue_exit(&ring_);
        throw std::system_error(err, std::system_category(), "eddy: eventfd for the reactor");
    }
    init_queues();
}

void Reactor::init_queues() {
    ready_.reserve(256);
    timer_queues_.reserve(host_.num_workers());
    const std::int64_t now = host_.clock_now_ns();
    for (std::size_t i = 0; i < host_.num_workers(); ++i)
        timer_queues_.push_back(std::make_unique<TimerQueue>(*this, now));
}

Reactor::~Reactor() {
    shutdown();
    if (epoll_ != nullptr) close(epoll_->fd);
    else io_uring_queue_exit(&ring_);
    close(event_fd_);
}

void Reactor::start() {
    const std::string name = host_.thread_name("reactor");
    thread_ = std::thread([this, name] {
        DriverHost::name_this_thread(name);  // before the start hook, which may want to see it
        // A write to a pipe or socket whose reader is gone raises SIGPIPE in the thread that
        // performs it: for io_uring, this one. Blocked here, it stays pending and harmless,
        // and the task gets EPIPE (sends on workers use MSG_NOSIGNAL instead).
        sigset_t pipe_only;
        sigemptyset(&pipe_only);
        sigaddset(&pipe_only, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe_only, nullptr);
        if (disabled_) {
            // This thread becomes the ring's single issuer.
            // (liburing 2.3 declares io_uring_enable_rings() but does not export it.)
            if (syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0) != 0) {
                std::fprintf(stderr, "eddy: reactor: enabling the io_uring ring failed: %s\n", std::strerror(errno));
                std::abort();
            }
        }
        DriverHost::run_thread_hook(host_.config().on_thread_start, "on_thread_start");
        run();
        DriverHost::run_thread_hook(host_.config().on_thread_stop, "on_thread_stop");
    });
    pthread_setname_np(thread_.native_handle(), name.c_str());  // visible once the Runtime is built
}

}  // namespace eddy::detail
