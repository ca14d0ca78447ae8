// benchmarks/spawn_many.cpp: from inside one task, spawn N tasks; each increments a counter
// and the one that reaches N signals completion (shared/bench/SPEC.md).
#include "bench_main.hpp"

namespace {

eddy::Task<void> bump(bench::Completion* c) {
    c->done_one();
    co_return;
}

eddy::Task<double> driver(std::uint64_t tasks, bench::Completion* c) {
    const auto start = bench::Clock::now();
    for (std::uint64_t i = 0; i < tasks; ++i) eddy::spawn(bump(c));  // handle dropped: detached
    co_await c->done;
    co_return bench::seconds_since(start);
}

}  // namespace

int main(int argc, char** argv) {
    bench::Args args(argc, argv, "spawn_many", {{"tasks", 1'000'000}});
    const std::uint64_t tasks = args.get("tasks");
    eddy::Runtime rt(args.config());
    bench::Completion done(tasks);
    const double secs = tasks == 0 ? 0.0 : rt.block_on(driver(tasks, &done));
    if (done.count.load() != tasks) bench::fail("spawn_many", "counter=" + std::to_string(done.count.load()));
    bench::report("spawn_many", rt.workers(), tasks, secs);
}
