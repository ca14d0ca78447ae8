// runtime/driver_host.cpp: DriverHost (eddy/runtime/detail/driver.hpp), the scheduler as its
// I/O driver sees it, and the driver lookups of a worker thread.
#include <eddy/runtime/detail/driver.hpp>

#include "scheduler.hpp"
#include "settings.hpp"
#include "worker.hpp"

#include <eddy/runtime/detail/scheduler_api.hpp>

namespace eddy::detail {

const RuntimeConfig& DriverHost::config() const noexcept { return sched_.config(); }

std::size_t DriverHost::num_workers() const noexcept { return sched_.num_workers(); }

std::string DriverHost::thread_name(std::string_view role) const { return detail::thread_name(sched_.config(), role); }

void DriverHost::run_thread_hook(const std::function<void()>& hook, const char* which) noexcept {
    detail::run_thread_hook(hook, which);
}

void DriverHost::name_this_thread(const std::string& name) noexcept { detail::name_this_thread(name); }

std::size_t DriverHost::current_worker_index() const noexcept {
    const Worker* w = current_worker();
    return w != nullptr && &w->scheduler() == &sched_ ? w->index() : kNotAWorker;
}

void DriverHost::note_driver_work() noexcept { current_worker()->note_driver_work(); }

void DriverHost::deliver(void* const* items, std::size_t n) noexcept { sched_.deliver_from_driver(items, n); }

void DriverHost::deliver_late(void* const* items, const std::int64_t* late_ns, std::size_t n) noexcept {
    sched_.deliver_late_from_driver(items, late_ns, n);
}

std::size_t DriverHost::unparked_workers() const noexcept { return sched_.idle().num_unparked(); }

std::size_t DriverHost::blocking_busy() const noexcept { return sched_.blocking().busy(); }

std::size_t DriverHost::global_depth() const noexcept { return sched_.global_depth(); }

void DriverHost::set_unwatched(bool v) noexcept { sched_.set_unwatched(v); }

void DriverHost::check_watchdog(std::int64_t now_ns) noexcept { sched_.watchdog().check(now_ns); }

bool DriverHost::clock_is_virtual() const noexcept { return sched_.clock().is_virtual(); }

bool DriverHost::clock_auto_advance() const noexcept { return sched_.clock().auto_advance(); }

std::int64_t DriverHost::clock_now_ns() const noexcept { return sched_.clock().now_ns(); }

void DriverHost::clock_set_now(std::int64_t t) noexcept { sched_.clock().set_now(t); }

void DriverHost::clock_lock_jumps() noexcept { sched_.clock().lock_jumps(); }

void DriverHost::clock_unlock_jumps() noexcept { sched_.clock().unlock_jumps(); }

std::int64_t DriverHost::clock_earliest_target() const {
    static_assert(kNoTarget == RuntimeClock::kNone);
    return sched_.clock().earliest_target();
}

void DriverHost::clock_complete_due(std::vector<void*>& ready) { sched_.clock().complete_due(ready); }

std::uint64_t DriverHost::clock_requests_posted() const noexcept { return sched_.clock().requests_posted(); }

Driver& require_driver(const char* what) { return *require_worker(what).driver(); }

Driver* this_thread_driver() noexcept {
    Scheduler* s = current_scheduler();
    return s != nullptr ? s->driver() : nullptr;
}

// Defined here, not in scheduler.cpp, for the driver's seam it serves: in scheduler.cpp it
// moved the scheduler's hot paths, and spawn_remote at 2 workers ran 13 % slower.
void Scheduler::deliver_late_from_driver(void* const* frames, const std::int64_t* late_ns, std::size_t n) noexcept {
    // Stamped from each deadline, not from now: a late timer's wait counts whole in the
    // scheduling delay, however late the driver got to it.
    const std::uint64_t now = sched_ticks();
    QueueItem chunk[64];
    for (std::size_t done = 0; done < n;) {
        const std::size_t k = n - done < 64 ? n - done : 64;
        for (std::size_t i = 0; i < k; ++i) {
            const std::uint64_t back =
                late_ns[done + i] > 0 ? sched_ns_to_ticks(static_cast<std::uint64_t>(late_ns[done + i])) : 0;
            chunk[i] = QueueItem{frames[done + i], (back < now ? now - back : 0) | 1};  // never 0: 0 means spawned
        }
        global_wakes_.push_bulk(driver_token_, chunk, k);
        done += k;
    }
    note_global_wakes();
    notify_parked();
}

}  // namespace eddy::detail
