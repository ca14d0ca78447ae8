// runtime/metrics.cpp: RuntimeMetrics::to_string (see eddy/runtime/metrics.hpp).
#include <eddy/runtime/metrics.hpp>

#include <chrono>
#include <cinttypes>
#include <cstdio>

namespace eddy {

std::string_view to_string(IoOpKind kind) noexcept {
    static constexpr std::string_view kNames[kIoOpKinds] = {"read",    "write", "recv",  "send", "accept",
                                                            "connect", "fs",    "fsync", "poll"};
    const auto i = static_cast<std::size_t>(kind);
    return i < kIoOpKinds ? kNames[i] : std::string_view("unknown");
}

std::string RuntimeMetrics::to_string() const {
    std::string out;
    char line[512];
    std::snprintf(line, sizeof line,
                  "runtime: workers=%zu tasks_spawned=%" PRIu64 " tasks_completed=%" PRIu64 " tasks_alive=%" PRIu64
                  " global_queue_depth=%zu\n",
                  workers.size(), tasks_spawned, tasks_completed, tasks_alive, global_queue_depth);
    out += line;
    const DurationHistogram delay = scheduling_delay();
    const auto us = [](std::chrono::nanoseconds d) { return static_cast<double>(d.count()) / 1e3; };
    std::snprintf(
        line, sizeof line, "scheduling_delay: count=%" PRIu64 " p50_us=%.1f p99_us=%.1f max_us=%.1f mean_us=%.1f\n",
        delay.count(), us(delay.percentile(0.5)), us(delay.percentile(0.99)), us(delay.max()), us(delay.mean()));
    out += line;
    for (std::size_t i = 0; i < workers.size(); ++i) {
        const WorkerMetrics& w = workers[i];
        std::snprintf(line, sizeof line,
                      "worker %zu: polled=%" PRIu64 " spawned=%" PRIu64 " completed=%" PRIu64 " steal_attempts=%" PRIu64
                      " steals=%" PRIu64 " stolen=%" PRIu64 " global_takes=%" PRIu64 " parks=%" PRIu64
                      " unparks=%" PRIu64 " overflows=%" PRIu64 " overflowed=%" PRIu64 " budget_yields=%" PRIu64
                      " slow_polls=%" PRIu64 " queue_depth=%zu delay_p99_us=%.1f delay_max_us=%.1f\n",
                      i, w.tasks_polled, w.tasks_spawned, w.tasks_completed, w.steal_attempts, w.steals, w.tasks_stolen,
                      w.global_queue_takes, w.parks, w.unparks, w.overflows, w.tasks_overflowed, w.budget_yields,
                      w.slow_polls, w.local_queue_depth, us(w.scheduling_delay.percentile(0.99)),
                      us(w.scheduling_delay.max()));
        out += line;
    }
    std::snprintf(line, sizeof line,
                  "reactor: operations=%" PRIu64 " submissions=%" PRIu64 " completions=%" PRIu64
                  " timers_fired=%" PRIu64 " wakeups=%" PRIu64 " in_flight=%zu timers_armed=%zu sockets_polled=%zu\n",
                  reactor.operations, reactor.submissions, reactor.completions, reactor.timers_fired, reactor.wakeups,
                  reactor.in_flight, reactor.timers_armed, reactor.sockets_polled);
    out += line;
    // One line for the kinds that saw operations: "io_latency: read n=12 p50_us=.. p99_us=.." ...
    // and none where nothing was timed (RuntimeConfig::io_latency_histogram is off by default),
    // so that the default rendering keeps its lines.
    std::string io = "io_latency:";
    for (std::size_t k = 0; k < kIoOpKinds; ++k) {
        const DurationHistogram& h = reactor.io_latency[k];
        if (h.count() == 0) continue;
        std::snprintf(line, sizeof line, " %s n=%" PRIu64 " p50_us=%.1f p99_us=%.1f max_us=%.1f;",
                      std::string(eddy::to_string(static_cast<IoOpKind>(k))).c_str(), h.count(), us(h.percentile(0.5)),
                      us(h.percentile(0.99)), us(h.max()));
        io += line;
    }
    if (io.back() == ';') {
        io.pop_back();
        out += io + "\n";
    }
    std::snprintf(line, sizeof line,
                  "blocking: threads=%zu idle=%zu queued=%zu calls=%" PRIu64 " left_running=%" PRIu64 "\n",
                  blocking_threads, blocking_idle, blocking_queued, blocking_calls, blocking_left_running);
    out += line;
    return out;
}

}  // namespace eddy
