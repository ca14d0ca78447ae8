// benchmarks/dump_pause.cpp: how long a task dump stops the workers (eddy only, not in
// shared/bench/SPEC.md; run by hand, see docs/performance/deadlines-and-dumps.md). Makes N
// waiting tasks (default 10,000, counting every node of the dump's tree) in a mix: most wait
// on an eddy::Event (a tenth of them named spawns), some sleep (an hour, cancellable), some wait in
// when_all (the vector form: a task of its own) for three children that wait on the Event.
// Then a plain thread (main) takes K dumps (default 50) with Runtime::dump(), checks that
// each saw all N tasks, and reads each dump's `paused` (from its pause request until the
// workers went on) and its wall time.
//
// With --load-secs S (default 0: none), one task per worker then yields in a loop, counting
// its turns, while the N tasks still wait: for S seconds undisturbed, then for S seconds
// while main dumps again and again. `load_ratio` is the second rate over the first: what a
// thread dumping in a loop leaves of the runtime's throughput (`load_dumps`: how many).
//
// Prints `records=on|off`, `pause_ms_median=.. pause_ms_max=.. pause_ms_first=..
// dump_ms_median=..` (the first dump reads every frame from cold caches), then the load's
// line if asked, then the SPEC line `bench=dump_pause ... ops=K secs=<the K dumps>
// rate=<dumps per second>`.
// Without -Dtask_dump=true frames keep no records: the dump lists the spawned tasks only (no
// when_all children) and says nothing about waits; the figures are then not the real cost.
#include "bench_main.hpp"

#include <algorithm>
#include <atomic>
#include <thread>
#include <stop_token>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;

struct Shared {
    explicit Shared(std::uint64_t n) : waiting(n), finished(n) {}
    eddy::Event go;
    std::stop_source stop;
    bench::Completion waiting;   // every node reached its wait
    bench::Completion finished;  // every node finished
};

eddy::Task<void> on_event(Shared* s) {
    s->waiting.done_one();
    co_await s->go;
    s->finished.done_one();
}

eddy::Task<void> sleeper(Shared* s) {
    s->waiting.done_one();
    try {
        co_await eddy::sleep(1h, s->stop.get_token());
    } catch (const eddy::OperationCancelled&) {
    }
    s->finished.done_one();
}

eddy::Task<void> fork(Shared* s) {
    s->waiting.done_one();
    s->waiting.done_one();  // the when_all's own task
    std::vector<eddy::Task<void>> children;
    for (int i = 0; i < 3; ++i) children.push_back(on_event(s));
    co_await eddy::when_all(std::move(children));  // a Task: this frame, its frame, 3 children
    s->finished.done_one();
    s->finished.done_one();
}

/// The numbers of each kind of root for `n` nodes: 5 % of the nodes in when_all trees (5
/// nodes each), 10 % sleeping, the rest waiting on the event (a tenth of them named).
struct Mix {
    explicit Mix(std::uint64_t n) : forks(n / 20 / 5), sleepers(n / 10), events(n - forks * 5 - sleepers) {}
    std::uint64_t forks, sleepers, events;
};

eddy::Task<void> setup(Shared* s, Mix mix) {
    for (std::uint64_t i = 0; i < mix.forks; ++i) eddy::spawn(fork(s));
    for (std::uint64_t i = 0; i < mix.sleepers; ++i) eddy::spawn(sleeper(s));
    for (std::uint64_t i = 0; i < mix.events; ++i) {
        if (i % 10 == 0) {
            eddy::spawn(on_event(s), "conn " + std::to_string(i));
        } else {
            eddy::spawn(on_event(s));
        }
    }
    co_await s->waiting.done;
}

/// The load of --load-secs: yields until `stop`, counting its turns.
eddy::Task<void> spinner(std::atomic<std::uint64_t>* turns, std::atomic<bool>* stop) {
    while (!stop->load(std::memory_order_relaxed)) {
        turns->fetch_add(1, std::memory_order_relaxed);
        co_await eddy::yield_now();
    }
}

/// Turns per second of the spinners over `secs`, with main dumping in a loop meanwhile when
/// `dump`; `dumps` counts those dumps.
double load_rate(eddy::Runtime& rt, const std::atomic<std::uint64_t>& turns, double secs, bool dump,
                 std::uint64_t& dumps) {
    const std::uint64_t before = turns.load(std::memory_order_relaxed);
    const auto start = bench::Clock::now();
    if (dump) {
        while (bench::seconds_since(start) < secs) {
            (void)rt.dump();
            ++dumps;
        }
    } else {
        std::this_thread::sleep_for(std::chrono::duration<double>(secs));
    }
    return static_cast<double>(turns.load(std::memory_order_relaxed) - before) / bench::seconds_since(start);
}

eddy::Task<void> teardown(Shared* s) {
    s->go.set();
    s->stop.request_stop();
    co_await s->finished.done;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double ms(std::chrono::nanoseconds d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

int main(int argc, char** argv) {
    bench::Args args(argc, argv, "dump_pause", {{"tasks", 10'000}, {"dumps", 50}, {"load-secs", 0}});
    const std::uint64_t tasks = args.get("tasks");
    const std::uint64_t dumps = args.get("dumps");
    if (tasks < 100) bench::fail("dump_pause", "--tasks must be at least 100");
    if (dumps == 0) bench::fail("dump_pause", "--dumps must be at least 1");
    const Mix mix(tasks);
    eddy::Runtime rt(args.config());
    Shared s(tasks);
    rt.block_on(setup(&s, mix));
    // Without records, a dump sees the spawned tasks only (not the when_all children).
    const std::uint64_t expected = EDDY_TASK_DUMP ? tasks : mix.forks + mix.sleepers + mix.events;
    std::printf("records=%s\n", EDDY_TASK_DUMP ? "on" : "off (built without -Dtask_dump=true: not the real cost)");
    std::vector<double> pauses, walls;
    const auto start = bench::Clock::now();
    for (std::uint64_t i = 0; i < dumps; ++i) {
        const auto t0 = bench::Clock::now();
        const eddy::TaskDump d = rt.dump();
        walls.push_back(ms(bench::Clock::now() - t0));
        if (!d.complete) bench::fail("dump_pause", "a partial dump: a worker did not stop");
        if (d.tasks != expected)
            bench::fail("dump_pause",
                        "dump saw " + std::to_string(d.tasks) + " tasks, not " + std::to_string(expected));
        pauses.push_back(ms(d.paused));
    }
    const double secs = bench::seconds_since(start);
    std::string load_line;
    if (const std::uint64_t load_secs = args.get("load-secs"); load_secs > 0) {
        std::atomic<std::uint64_t> turns{0};
        std::atomic<bool> stop{false};
        std::vector<eddy::JoinHandle<void>> spinners;
        for (std::size_t i = 0; i < rt.workers(); ++i) spinners.push_back(rt.spawn(spinner(&turns, &stop)));
        std::uint64_t load_dumps = 0;
        const double quiet = load_rate(rt, turns, static_cast<double>(load_secs), false, load_dumps);
        const double dumping = load_rate(rt, turns, static_cast<double>(load_secs), true, load_dumps);
        stop.store(true, std::memory_order_relaxed);
        for (auto& h : spinners) rt.block_on(std::move(h));
        load_line = "load_turns_per_s=" + std::to_string(static_cast<std::uint64_t>(quiet)) +
                    " load_ratio=" + std::to_string(dumping / quiet) + " load_dumps=" + std::to_string(load_dumps) +
                    "\n";
    }
    rt.block_on(teardown(&s));
    if (s.finished.count.load() != tasks)
        bench::fail("dump_pause", "finished=" + std::to_string(s.finished.count.load()));
    std::printf("pause_ms_median=%.3f pause_ms_max=%.3f pause_ms_first=%.3f dump_ms_median=%.3f\n", median(pauses),
                *std::max_element(pauses.begin(), pauses.end()), pauses.front(), median(walls));
    std::fputs(load_line.c_str(), stdout);
    bench::report("dump_pause", rt.workers(), dumps, secs);
}
