// benchmarks/task_memory.cpp: what a suspended task costs in memory (not in
// shared/bench/SPEC.md; its result line). From inside one task, spawn N tasks (default
// 1,000,000; handles dropped: detached) that each wait on one eddy::Event; once all of them
// have reached the wait, read the process's resident memory (VmRSS of /proc/self/status)
// and compare it with the reading taken before the first spawn; then set the event and check
// that every task finished.
//
// Prints `bytes_per_task=<(after - before) / N>`, then the SPEC line
// `bench=task_memory ... ops=N secs=<spawning until the last task waits> rate=<N / secs>`.
// The Tokio twin is benchmarks/tokio-servers' task_memory (tokio::sync::Notify).
// What a task holds while it waits: its coroutine frame (with the join state in the same
// allocation) and the Event's waiter node, which lives in the frame.
#include "bench_main.hpp"

#include <fstream>
#include <string>

namespace {

/// VmRSS of this process, in bytes (0 when /proc is not there).
std::uint64_t resident_bytes() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // "VmRSS:   1234 kB"
    }
    return 0;
}

eddy::Task<void> waiter(eddy::Event* go, bench::Completion* waiting, bench::Completion* finished) {
    waiting->done_one();  // the last one signals: every task has reached the wait below
    co_await *go;
    finished->done_one();
}

struct Reading {
    std::uint64_t before = 0;
    std::uint64_t after = 0;
    double secs = 0;
};

eddy::Task<Reading> driver(std::uint64_t tasks, eddy::Event* go, bench::Completion* waiting,
                           bench::Completion* finished) {
    Reading r;
    r.before = resident_bytes();
    const auto start = bench::Clock::now();
    for (std::uint64_t i = 0; i < tasks; ++i) eddy::spawn(waiter(go, waiting, finished));  // detached
    co_await waiting->done;
    r.secs = bench::seconds_since(start);
    r.after = resident_bytes();
    go->set();
    co_await finished->done;
    co_return r;
}

}  // namespace

int main(int argc, char** argv) {
    bench::Args args(argc, argv, "task_memory", {{"tasks", 1'000'000}});
    const std::uint64_t tasks = args.get("tasks");
    if (tasks == 0) bench::fail("task_memory", "--tasks must be at least 1");
    eddy::Runtime rt(args.config());
    eddy::Event go;
    bench::Completion waiting(tasks), finished(tasks);
    const Reading r = rt.block_on(driver(tasks, &go, &waiting, &finished));
    if (finished.count.load() != tasks) bench::fail("task_memory", "finished=" + std::to_string(finished.count.load()));
    if (r.after == 0) bench::fail("task_memory", "no VmRSS in /proc/self/status");
    const std::uint64_t grown = r.after > r.before ? r.after - r.before : 0;
    std::printf("bytes_per_task=%llu\n", static_cast<unsigned long long>(grown / tasks));
    bench::report("task_memory", rt.workers(), tasks, r.secs);
}
