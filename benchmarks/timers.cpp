// benchmarks/timers.cpp: N tasks each sleep 1 + (i % 10) ms, then signal; prints
// overhead_ms = wall time minus the longest sleep (shared/bench/SPEC.md). Each timer also
// checks that it did not fire early.
#include "bench_main.hpp"

namespace {

using namespace std::chrono;

eddy::Task<void> sleeper(milliseconds d, bench::Completion* c, std::atomic<std::uint64_t>* early) {
    const auto start = bench::Clock::now();
    co_await eddy::sleep(d);
    if (bench::Clock::now() - start < d) early->fetch_add(1, std::memory_order_relaxed);
    c->done_one();
}

eddy::Task<double> driver(std::uint64_t n, bench::Completion* c, std::atomic<std::uint64_t>* early) {
    const auto start = bench::Clock::now();
    for (std::uint64_t i = 0; i < n; ++i) eddy::spawn(sleeper(milliseconds(1 + i % 10), c, early));
    co_await c->done;
    co_return bench::seconds_since(start);
}

}  // namespace

int main(int argc, char** argv) {
    bench::Args args(argc, argv, "timers", {{"timers", 100'000}});
    const std::uint64_t n = args.get("timers");
    if (n == 0) bench::fail("timers", "--timers must be at least 1");
    eddy::Runtime rt(args.config());
    bench::Completion done(n);
    std::atomic<std::uint64_t> early{0};
    const double secs = rt.block_on(driver(n, &done, &early));
    if (done.count.load() != n) bench::fail("timers", "fired=" + std::to_string(done.count.load()));
    if (early.load() != 0) bench::fail("timers", std::to_string(early.load()) + " timers fired early");
    const double longest_ms = static_cast<double>(1 + (n < 10 ? n - 1 : 9));
    if (secs * 1e3 < longest_ms) bench::fail("timers", "finished before the longest sleep");
    std::printf("overhead_ms=%.3f\n", secs * 1e3 - longest_ms);
    bench::report("timers", rt.workers(), n, secs);
}
