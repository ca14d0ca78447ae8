// benchmarks/yield_many.cpp: T tasks each yield Y times (shared/bench/SPEC.md).
#include "bench_main.hpp"

namespace {

eddy::Task<void> yielder(std::uint64_t yields, std::atomic<std::uint64_t>* total, bench::Completion* c) {
    std::uint64_t n = 0;
    for (std::uint64_t i = 0; i < yields; ++i) {
        co_await eddy::yield_now();
        ++n;
    }
    total->fetch_add(n, std::memory_order_relaxed);
    c->done_one();
}

eddy::Task<double> driver(std::uint64_t tasks, std::uint64_t yields, std::atomic<std::uint64_t>* total,
                          bench::Completion* c) {
    const auto start = bench::Clock::now();
    for (std::uint64_t i = 0; i < tasks; ++i) eddy::spawn(yielder(yields, total, c));
    co_await c->done;
    co_return bench::seconds_since(start);
}

}  // namespace

int main(int argc, char** argv) {
    bench::Args args(argc, argv, "yield_many", {{"tasks", 1000}, {"yields", 1000}});
    const std::uint64_t tasks = args.get("tasks"), yields = args.get("yields");
    eddy::Runtime rt(args.config());
    bench::Completion done(tasks);
    std::atomic<std::uint64_t> total{0};
    const double secs = tasks == 0 ? 0.0 : rt.block_on(driver(tasks, yields, &total, &done));
    if (total.load() != tasks * yields) bench::fail("yield_many", "yields=" + std::to_string(total.load()));
    bench::report("yield_many", rt.workers(), tasks * yields, secs);
}
