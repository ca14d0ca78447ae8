// eddy/runtime/detail/duration_recorder.hpp: DurationRecorder, a DurationHistogram with one
// writer and any number of readers (the workers' scheduling delay and poll time, the
// reactor's I/O latency). Not for users: RuntimeMetrics hands out its snapshots.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include <eddy/runtime/histogram.hpp>

namespace eddy::detail {

/// Written by one thread only, read by any (metrics()), like OwnedCounter: each field is a
/// relaxed atomic updated with a load and a store (no read-modify-write, nobody else
/// writes). A snapshot is not taken atomically as a whole: count() may be a record or two
/// ahead of the buckets it sums, as any figure of a running runtime.
class DurationRecorder {
public:
    /// Owner thread: one duration of `ns` nanoseconds.
    void record_ns(std::uint64_t ns) noexcept {
        bump(buckets_[DurationHistogram::bucket_of(ns)], 1);
        bump(count_, 1);
        bump(sum_ns_, ns);
        if (ns > max_ns_.load(std::memory_order_relaxed)) max_ns_.store(ns, std::memory_order_relaxed);
    }
    /// Any thread: a copy.
    DurationHistogram snapshot() const noexcept {
        DurationHistogram h;
        for (std::size_t i = 0; i < DurationHistogram::kBuckets; ++i)
            h.set_raw(i, buckets_[i].load(std::memory_order_relaxed));
        h.set_totals(count_.load(std::memory_order_relaxed), sum_ns_.load(std::memory_order_relaxed),
                     max_ns_.load(std::memory_order_relaxed));
        return h;
    }

private:
    static void bump(std::atomic<std::uint64_t>& c, std::uint64_t n) noexcept {
        c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    }

    std::atomic<std::uint64_t> buckets_[DurationHistogram::kBuckets] = {};
    std::atomic<std::uint64_t> count_{0};
    std::atomic<std::uint64_t> sum_ns_{0};
    std::atomic<std::uint64_t> max_ns_{0};
};

}  // namespace eddy::detail
