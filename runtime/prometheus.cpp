// runtime/prometheus.cpp: RuntimeMetrics::to_prometheus, the text exposition format 0.0.4
// (eddy/runtime/metrics.hpp).
//
// Each family is written whole, its HELP and TYPE first, then its series (per worker: one
// per worker label), so no series repeats. Histograms are reported in seconds with one
// bucket bound per power of two of nanoseconds, from 1 us to 34 s, plus +Inf. A bound is
// the last nanosecond of the DurationHistogram buckets below it (2^k - 1 ns), so the
// cumulative counts are exact: `le` means "at most", and the durations are whole ns.
#include <eddy/runtime/metrics.hpp>

#include <cinttypes>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace eddy {
namespace {

bool valid_prefix(std::string_view p) noexcept {
    if (p.empty()) return false;
    for (std::size_t i = 0; i < p.size(); ++i) {
        const char c = p[i];
        const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
        if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
    }
    return true;
}

/// A label value or HELP text with \, " (labels only) and newlines escaped.
std::string escape(std::string_view s, bool label) {
    std::string out;
    for (const char c : s) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '"' && label) {
            out += "\\\"";
        } else {
            out += c;
        }
    }
    return out;
}

class Writer {
public:
    explicit Writer(std::string_view prefix) : prefix_(prefix) {}

    /// Starts the family `name` (without prefix; counters include their _total).
    void family(std::string_view name, const char* type, std::string_view help) {
        // In 0.0.4 a counter's HELP and TYPE name its sample, _total included (OpenMetrics
        // would drop the suffix there).
        name_ = std::string(prefix_) + "_" + std::string(name);
        out_ += "# HELP " + name_ + " " + escape(help, false) + "\n";
        out_ += "# TYPE " + name_ + " " + type + "\n";
    }
    void sample(std::uint64_t v, std::string_view labels = {}, std::string_view suffix = {}) {
        char num[32];
        std::snprintf(num, sizeof num, "%" PRIu64, v);
        line(labels, suffix, num);
    }
    void sample_seconds(std::uint64_t ns, std::string_view labels, std::string_view suffix) {
        char num[40];
        std::snprintf(num, sizeof num, "%.9f", static_cast<double>(ns) / 1e9);
        line(labels, suffix, num);
    }
    /// A histogram's series for one label set (`labels`: `worker="0"` or empty).
    void histogram(const DurationHistogram& h, const std::string& labels) {
        const std::string sep = labels.empty() ? "" : labels + ",";
        std::uint64_t below = 0;
        std::size_t i = 0;
        for (std::size_t k = 16 + 8 * 8; k <= 16 + 8 * 33; k += 8) {  // le 2^12 - 1 ns .. 2^37 - 1 ns
            for (; i < k; ++i) below += h.bucket(i);
            const auto bound_ns = static_cast<std::uint64_t>(DurationHistogram::bucket_lower(k).count()) - 1;
            char le[48];
            std::snprintf(le, sizeof le, "le=\"%.9f\"", static_cast<double>(bound_ns) / 1e9);
            sample(below, sep + le, "_bucket");
        }
        sample(h.count(), sep + "le=\"+Inf\"", "_bucket");
        sample_seconds(static_cast<std::uint64_t>(h.sum().count()), labels, "_sum");
        sample(h.count(), labels, "_count");
    }
    std::string take() { return std::move(out_); }

private:
    void line(std::string_view labels, std::string_view suffix, const char* value) {
        out_ += name_;
        out_ += suffix;
        if (!labels.empty()) {
            out_ += '{';
            out_ += labels;
            out_ += '}';
        }
        out_ += ' ';
        out_ += value;
        out_ += '\n';
    }

    std::string_view prefix_;
    std::string name_;
    std::string out_;
};

std::string worker_label(std::size_t i) { return "worker=\"" + escape(std::to_string(i), true) + "\""; }

}  // namespace

std::string RuntimeMetrics::to_prometheus(std::string_view prefix) const {
    if (!valid_prefix(prefix))
        throw std::invalid_argument("eddy: RuntimeMetrics::to_prometheus: prefix \"" + std::string(prefix) +
                                    "\" is not a metric name (letters, digits, '_', ':'; not starting with a digit)");
    Writer w(prefix);
    const auto gauge = [&w](std::string_view name, std::uint64_t v, std::string_view help) {
        w.family(name, "gauge", help);
        w.sample(v);
    };
    const auto counter = [&w](std::string_view name, std::uint64_t v, std::string_view help) {
        w.family(name, "counter", help);
        w.sample(v);
    };
    gauge("workers", workers.size(), "Worker threads of the runtime.");
    counter("tasks_spawned_total", tasks_spawned, "Root tasks spawned.");
    counter("tasks_completed_total", tasks_completed, "Root tasks that finished.");
    gauge("tasks_alive", tasks_alive, "Root tasks spawned and not finished.");
    gauge("global_queue_depth", global_queue_depth, "Tasks in the global queues (approximate).");

    struct PerWorker {
        const char* name;
        std::uint64_t WorkerMetrics::*figure;
        const char* help;
    };
    static constexpr PerWorker kWorkerCounters[] = {
        {"worker_polls_total", &WorkerMetrics::tasks_polled, "Frames resumed by the worker."},
        {"worker_spawns_total", &WorkerMetrics::tasks_spawned, "Root tasks spawned from the worker."},
        {"worker_completions_total", &WorkerMetrics::tasks_completed, "Root tasks that finished on the worker."},
        {"worker_steal_attempts_total", &WorkerMetrics::steal_attempts, "Looks into another worker's queues."},
        {"worker_steals_total", &WorkerMetrics::steals, "Looks that took tasks."},
        {"worker_stolen_tasks_total", &WorkerMetrics::tasks_stolen, "Tasks taken by steals."},
        {"worker_global_queue_takes_total", &WorkerMetrics::global_queue_takes, "Tasks taken from the global queues."},
        {"worker_parks_total", &WorkerMetrics::parks, "Times the worker went to sleep."},
        {"worker_unparks_total", &WorkerMetrics::unparks, "Times the worker was woken to look for work."},
        {"worker_overflows_total", &WorkerMetrics::overflows,
         "Times a full local queue moved half to the global queue."},
        {"worker_overflowed_tasks_total", &WorkerMetrics::tasks_overflowed, "Tasks moved by overflows."},
        {"worker_budget_yields_total", &WorkerMetrics::budget_yields, "Tasks made to yield by the cooperative budget."},
        {"worker_slow_polls_total", &WorkerMetrics::slow_polls, "Polls that ran past the slow-poll threshold."},
    };
    for (const PerWorker& f : kWorkerCounters) {
        w.family(f.name, "counter", f.help);
        for (std::size_t i = 0; i < workers.size(); ++i) w.sample(workers[i].*f.figure, worker_label(i));
    }
    w.family("worker_local_queue_depth", "gauge", "Tasks in the worker's local queues.");
    for (std::size_t i = 0; i < workers.size(); ++i) w.sample(workers[i].local_queue_depth, worker_label(i));
    w.family("worker_scheduling_delay_seconds", "histogram",
             "How long woken tasks waited in the worker's queues before their poll.");
    for (std::size_t i = 0; i < workers.size(); ++i) w.histogram(workers[i].scheduling_delay, worker_label(i));
    w.family("worker_poll_time_seconds", "histogram",
             "How long each poll ran (empty unless RuntimeConfig::poll_time_histogram).");
    for (std::size_t i = 0; i < workers.size(); ++i) w.histogram(workers[i].poll_time, worker_label(i));

    counter("reactor_operations_total", reactor.operations, "I/O operations handed to the reactor.");
    counter("reactor_submissions_total", reactor.submissions, "SQEs submitted to the kernel.");
    counter("reactor_completions_total", reactor.completions, "CQEs reaped.");
    counter("reactor_timers_fired_total", reactor.timers_fired, "Sleeps that reached their deadline.");
    counter("reactor_wakeups_total", reactor.wakeups, "Times a worker woke the sleeping reactor.");
    gauge("reactor_in_flight", reactor.in_flight, "Completions the kernel still owes.");
    gauge("reactor_timers_armed", reactor.timers_armed, "Timers waiting for their deadline.");
    gauge("reactor_sockets_polled", reactor.sockets_polled, "Sockets with a multishot poll in the ring.");
    w.family("reactor_io_latency_seconds", "histogram",
             "How long reactor I/O operations took, from the reactor's submission to the completion, by op.");
    for (std::size_t k = 0; k < kIoOpKinds; ++k)
        w.histogram(reactor.io_latency[k], "op=\"" + std::string(eddy::to_string(static_cast<IoOpKind>(k))) + "\"");

    gauge("blocking_threads", blocking_threads, "Blocking pool threads alive.");
    gauge("blocking_idle", blocking_idle, "Blocking pool threads waiting for a call.");
    gauge("blocking_queued", blocking_queued, "Blocking calls waiting for a thread.");
    counter("blocking_calls_total", blocking_calls, "Blocking calls that have run.");
    counter("blocking_left_running_total", blocking_left_running,
            "Blocking calls still running when shutdown stopped waiting.");
    return w.take();
}

}  // namespace eddy
