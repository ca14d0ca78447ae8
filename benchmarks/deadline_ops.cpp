// benchmarks/deadline_ops.cpp (eddy only, not in SPEC.md; run by hand): what a time limit
// costs per I/O operation. `pairs` pairs of tasks play ping-pong over two pipes, `iters`
// round trips each; every read waits, so it goes to the reactor as an io_uring operation.
//   --mode none          `co_await eddy::io::read(fd, b)`: no limit, no frame.
//   --mode timeout       `co_await eddy::with_timeout(eddy::io::read(fd, b), 10s)`: the
//                        operation under a timer armed and disarmed on the worker, in place
//                        (no coroutine frame).
//   --mode task_timeout  the same around a one-line task that does the read, the way it had
//                        to be written before with_timeout took operations (a frame per read).
//   --mode deadline      each task's whole loop under one with_deadline(60s, loop): each read
//                        carries the deadline into the kernel as a linked
//                        IORING_OP_LINK_TIMEOUT (one more SQE and CQE, no timer).
// Prints the SPEC line (ops = reads) and the process's CPU time (user + system, every
// thread: workers and reactor) per read, which is the figure to compare: the ping-pong's
// wall time is bounded by wake-ups, not by the limit's cost.
// Self-check: every read got its byte, none timed out.
#include "bench_main.hpp"

#include <sys/resource.h>
#include <unistd.h>

namespace {

using namespace std::chrono_literals;

enum class Mode { kNone, kTimeout, kTaskTimeout, kDeadline };

double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

eddy::Task<std::size_t> read_one(int fd) {
    std::array<std::byte, 1> b{};
    co_return co_await eddy::io::read(fd, b);
}

/// One side: `first` writes before it reads. Gives the bytes it read.
eddy::Task<std::uint64_t> side(int rd, int wr, bool first, std::uint64_t iters, Mode mode) {
    const std::byte one{1};
    std::uint64_t got = 0;
    for (std::uint64_t i = 0; i < iters; ++i) {
        if (first) co_await eddy::io::write(wr, std::span(&one, 1));
        std::array<std::byte, 1> b{};
        switch (mode) {
        case Mode::kTimeout:
            got += co_await eddy::with_timeout(eddy::io::read(rd, b), 10s);
            break;
        case Mode::kTaskTimeout:
            got += co_await eddy::with_timeout(read_one(rd), 10s);
            break;
        default:
            got += co_await eddy::io::read(rd, b);
            break;
        }
        if (!first) co_await eddy::io::write(wr, std::span(&one, 1));
    }
    co_return got;
}

eddy::Task<void> pair_task(std::uint64_t iters, Mode mode, std::atomic<std::uint64_t>* reads, bench::Completion* c) {
    auto ping = eddy::io::pipe();
    auto pong = eddy::io::pipe();
    auto a = side(pong.read_end.get(), ping.write_end.get(), true, iters, mode);
    auto b = side(ping.read_end.get(), pong.write_end.get(), false, iters, mode);
    std::uint64_t x = 0, y = 0;
    if (mode == Mode::kDeadline) {
        auto [p, q] =
            co_await eddy::when_all(eddy::with_deadline(60s, std::move(a)), eddy::with_deadline(60s, std::move(b)));
        x = p;
        y = q;
    } else {
        auto [p, q] = co_await eddy::when_all(std::move(a), std::move(b));
        x = p;
        y = q;
    }
    reads->fetch_add(x + y, std::memory_order_relaxed);
    c->done_one();
}

eddy::Task<double> driver(std::uint64_t pairs, std::uint64_t iters, Mode mode, std::atomic<std::uint64_t>* reads,
                          bench::Completion* c) {
    const auto start = bench::Clock::now();
    for (std::uint64_t i = 0; i < pairs; ++i) eddy::spawn(pair_task(iters, mode, reads, c));
    co_await c->done;
    co_return bench::seconds_since(start);
}

}  // namespace

int main(int argc, char** argv) {
    bench::Args args(argc, argv, "deadline_ops", {{"pairs", 8}, {"iters", 20000}},
                     {{"mode", {"deadline", "timeout", "task_timeout", "none"}}});
    const std::uint64_t pairs = args.get("pairs"), iters = args.get("iters");
    const std::string& m = args.choice("mode");
    const Mode mode = m == "timeout"        ? Mode::kTimeout
                      : m == "task_timeout" ? Mode::kTaskTimeout
                      : m == "none"         ? Mode::kNone
                                            : Mode::kDeadline;
    eddy::Runtime rt(args.config());
    bench::Completion done(pairs);
    std::atomic<std::uint64_t> reads{0};
    const double cpu0 = cpu_seconds();
    const double secs = pairs == 0 ? 0.0 : rt.block_on(driver(pairs, iters, mode, &reads, &done));
    const double cpu = cpu_seconds() - cpu0;
    const std::uint64_t expected = pairs * iters * 2;
    if (reads.load() != expected)
        bench::fail("deadline_ops", "reads=" + std::to_string(reads.load()) + " expected=" + std::to_string(expected));
    bench::report("deadline_ops", rt.workers(), expected, secs);
    std::printf("mode=%s cpu_ns_per_op=%.0f wall_ns_per_op=%.0f\n", m.c_str(),
                cpu * 1e9 / static_cast<double>(expected), secs * 1e9 / static_cast<double>(expected));
}
