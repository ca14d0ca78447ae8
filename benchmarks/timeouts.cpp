// benchmarks/timeouts.cpp: T tasks each run I iterations of an operation (one yield_now) under
// a 1 s timeout that never fires (shared/bench/SPEC.md): the cost of arming and cancelling a
// timer per operation. The operation is eddy::yield_now() itself, as Tokio's anchor awaits
// tokio::task::yield_now() under tokio::time::timeout: with_timeout takes it in place, with no
// coroutine frame around it. Self-check: every iteration completed without eddy::TimedOut.
#include "bench_main.hpp"

namespace {

using namespace std::chrono_literals;

eddy::Task<void> worker(std::uint64_t iters, std::atomic<std::uint64_t>* completed,
                        std::atomic<std::uint64_t>* timed_out, bench::Completion* c) {
    std::uint64_t ok = 0, late = 0;
    for (std::uint64_t i = 0; i < iters; ++i) {
        try {
            co_await eddy::with_timeout(eddy::yield_now(), 1s);
            ++ok;
        } catch (const eddy::TimedOut&) {
            ++late;
        }
    }
    completed->fetch_add(ok, std::memory_order_relaxed);
    timed_out->fetch_add(late, std::memory_order_relaxed);
    c->done_one();
}

eddy::Task<double> driver(std::uint64_t tasks, std::uint64_t iters, std::atomic<std::uint64_t>* completed,
                          std::atomic<std::uint64_t>* timed_out, bench::Completion* c) {
    const auto start = bench::Clock::now();
    for (std::uint64_t i = 0; i < tasks; ++i) eddy::spawn(worker(iters, completed, timed_out, c));
    co_await c->done;
    co_return bench::seconds_since(start);
}

}  // namespace

int main(int argc, char** argv) {
    bench::Args args(argc, argv, "timeouts", {{"tasks", 1000}, {"iters", 1000}});
    const std::uint64_t tasks = args.get("tasks"), iters = args.get("iters");
    eddy::Runtime rt(args.config());
    bench::Completion done(tasks);
    std::atomic<std::uint64_t> completed{0}, timed_out{0};
    const double secs = tasks == 0 ? 0.0 : rt.block_on(driver(tasks, iters, &completed, &timed_out, &done));
    if (timed_out.load() != 0 || completed.load() != tasks * iters)
        bench::fail("timeouts", "completed=" + std::to_string(completed.load()) + " timed_out=" +
                                    std::to_string(timed_out.load()) + " expected=" + std::to_string(tasks * iters));
    bench::report("timeouts", rt.workers(), tasks * iters, secs);
}
