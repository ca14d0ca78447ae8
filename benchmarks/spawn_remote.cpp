// benchmarks/spawn_remote.cpp: a plain thread outside the runtime spawns N tasks (the
// injection path); the task that reaches N wakes that thread (shared/bench/SPEC.md).
#include "bench_main.hpp"

#include <semaphore>
#include <thread>

namespace {

struct RemoteDone {
    std::atomic<std::uint64_t> count{0};
    std::uint64_t target = 0;
    std::binary_semaphore wake{0};
};

eddy::Task<void> bump(RemoteDone* d) {
    if (d->count.fetch_add(1, std::memory_order_acq_rel) + 1 == d->target) d->wake.release();
    co_return;
}

}  // namespace

int main(int argc, char** argv) {
    bench::Args args(argc, argv, "spawn_remote", {{"tasks", 1'000'000}});
    const std::uint64_t tasks = args.get("tasks");
    eddy::Runtime rt(args.config());
    RemoteDone done;
    done.target = tasks;
    double secs = 0;
    std::thread spawner([&] {
        const auto start = bench::Clock::now();
        for (std::uint64_t i = 0; i < tasks; ++i) rt.spawn(bump(&done));
        if (tasks > 0) done.wake.acquire();
        secs = bench::seconds_since(start);
    });
    spawner.join();
    if (done.count.load() != tasks) bench::fail("spawn_remote", "counter=" + std::to_string(done.count.load()));
    bench::report("spawn_remote", rt.workers(), tasks, secs);
}
