// runtime/sched_delay.cpp: the scheduling clock's calibration (sched_delay.hpp, queue_item.hpp).
#include "sched_delay.hpp"

#include "queue_item.hpp"

#include <algorithm>
#include <chrono>
#include <mutex>

namespace eddy::detail {
namespace {

// Nanoseconds per tick in 32.32 fixed point. Written once, inside call_once, before any
// thread that reads it is started (Scheduler's constructor calls calibrate before it starts
// its threads; thread creation orders the write before their reads). Relaxed: that order is
// all it needs.
std::atomic<std::uint64_t> g_ns_per_tick_q32{std::uint64_t{1} << 32};
// Its inverse, ticks per nanosecond in 32.32 (a multiplication where a timer's lateness
// becomes a stamp, instead of a division per timer). Written and read as the one above.
std::atomic<std::uint64_t> g_ticks_per_ns_q32{std::uint64_t{1} << 32};
std::once_flag g_calibrated;

#if defined(__x86_64__)
struct Reading {
    std::uint64_t ticks;
    std::int64_t ns;
};

/// A (ticks, steady ns) pair taken as close together as we can: the best of a few tries,
/// judged by how many ticks the steady clock's read took (a preempted try is discarded).
Reading read_both() {
    Reading best{};
    std::uint64_t best_span = ~std::uint64_t{0};
    for (int i = 0; i < 5; ++i) {
        const std::uint64_t before = sched_ticks();
        const std::int64_t ns = std::chrono::steady_clock::now().time_since_epoch().count();
        const std::uint64_t after = sched_ticks();
        if (after - before < best_span) {
            best_span = after - before;
            best = {before + (after - before) / 2, ns};
        }
    }
    return best;
}
#endif

}  // namespace

void calibrate_sched_ticks() {
#if defined(__x86_64__)
    std::call_once(g_calibrated, [] {
        // 200 us against the steady clock: its reads are good to a few tens of ns, so the
        // ratio is good to about 0.05 %, far below the histogram's 12.5 % buckets.
        const Reading a = read_both();
        while (std::chrono::steady_clock::now().time_since_epoch().count() - a.ns < 200'000) {
        }
        const Reading b = read_both();
        if (b.ticks <= a.ticks || b.ns <= a.ns) return;  // keep 1 tick = 1 ns rather than nonsense
        const auto q32 =
            static_cast<std::uint64_t>((static_cast<unsigned __int128>(b.ns - a.ns) << 32) / (b.ticks - a.ticks));
        g_ns_per_tick_q32.store(std::max<std::uint64_t>(q32, 1), std::memory_order_relaxed);
        const auto inverse =
            static_cast<std::uint64_t>((static_cast<unsigned __int128>(b.ticks - a.ticks) << 32) / (b.ns - a.ns));
        g_ticks_per_ns_q32.store(std::max<std::uint64_t>(inverse, 1), std::memory_order_relaxed);
    });
#endif
}

std::uint64_t sched_ticks_to_ns(std::uint64_t ticks) noexcept {
    const auto q32 = g_ns_per_tick_q32.load(std::memory_order_relaxed);
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(ticks) * q32) >> 32);
}

std::uint64_t sched_ns_to_ticks(std::uint64_t ns) noexcept {
    const auto q32 = g_ticks_per_ns_q32.load(std::memory_order_relaxed);
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(ns) * q32) >> 32);
}

}  // namespace eddy::detail
