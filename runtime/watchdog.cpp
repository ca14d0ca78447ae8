// runtime/watchdog.cpp: see watchdog.hpp.
#include "watchdog.hpp"

#include "hooks.hpp"
#include "worker.hpp"

#include <cstdio>

namespace eddy::detail {

Watchdog::Watchdog(const RuntimeConfig& config, std::vector<Worker*> workers, std::function<void()> wake_a_worker)
    : config_(config), workers_(std::move(workers)), wake_a_worker_(std::move(wake_a_worker)),
      threshold_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(config.slow_poll_threshold).count()),
      seen_(workers_.size()) {}

void Watchdog::check(std::int64_t now_ns) noexcept {
    if (now_ns - last_check_ns_ < kWatchIntervalNs) return;
    last_check_ns_ = now_ns;
    for (std::size_t i = 0; i < seen_.size(); ++i) {
        Seen& s = seen_[i];
        Worker& w = *workers_[i];
        const std::uint64_t seq = w.poll_seq();
        if (seq != s.seq || (seq & 1) == 0) {
            if (s.slot_freed) w.mark_stale(0);  // that poll is over
            s.seq = seq;
            s.since_ns = now_ns;
            s.slot_freed = s.reported = false;
            continue;
        }
        // The same poll as at the last look.
        const std::int64_t running = now_ns - s.since_ns;
        if (running >= kStaleSlotNs && w.slot_occupied()) {
            if (!s.slot_freed) w.mark_stale(seq);
            s.slot_freed = true;
            // At every look while the task waits: a worker that was searching when we first
            // asked (so none was woken) may have looked at the slot before it was marked, and
            // parked since.
            wake_a_worker_();  // a worker that wakes looks at the slot (steal_work)
        }
        if (threshold_ns_ > 0 && !s.reported && running >= threshold_ns_) {
            s.reported = true;
            s.slow_polls.add();
            report(i, seq, running);
        }
    }
}

void Watchdog::report(std::size_t worker, std::uint64_t seq, std::int64_t running_ns) noexcept {
    // The task and its site: task-dump builds only, and only while that poll still runs.
    PollSite::Copy site;
    SlowPoll p;
    p.worker = worker;
    p.running = std::chrono::nanoseconds(running_ns);
    if (workers_[worker]->poll_site(seq, site)) {
        p.task_name = site.name;
        if (site.file != nullptr) p.file = site.file;
        if (site.function != nullptr) p.function = site.function;
        p.line = site.line;
    }
    const auto& hook = config_.on_slow_poll;
    if (!hook && !config_.on_slow_poll_detail) {
        char task[160] = "";  // ": task NAME at FILE:LINE", what is known of it
        int n = 0;
        if (!p.task_name.empty())
            n = std::snprintf(task, sizeof task, ": task %.*s", static_cast<int>(p.task_name.size()),
                              p.task_name.data());
        if (!p.file.empty() && n >= 0 && static_cast<std::size_t>(n) < sizeof task)
            std::snprintf(task + n, sizeof task - static_cast<std::size_t>(n), "%s at %.*s:%u", n == 0 ? ":" : "",
                          static_cast<int>(p.file.size()), p.file.data(), p.line);
        std::fprintf(
            stderr,
            "eddy: worker %zu has run one task for %.1f ms without suspending (slow_poll_threshold %lld ms)%s\n",
            worker, static_cast<double>(running_ns) / 1e6, static_cast<long long>(config_.slow_poll_threshold.count()),
            task);
        return;
    }
    if (config_.on_slow_poll_detail) call_guarded("on_slow_poll_detail", [&] { config_.on_slow_poll_detail(p); });
    else call_guarded("on_slow_poll", [&] { hook(worker, std::chrono::nanoseconds(running_ns)); });
}

}  // namespace eddy::detail
