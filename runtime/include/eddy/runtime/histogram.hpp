//! eddy/runtime/histogram.hpp: DurationHistogram, a distribution of durations with a fixed
//! relative precision, as RuntimeMetrics reports it (the scheduling delay, metrics.hpp).
//!
//!     const eddy::DurationHistogram d = rt.metrics().scheduling_delay();
//!     std::printf("p99 %lld us, max %lld us over %llu wake-ups\n",
//!                 (long long)(d.percentile(0.99).count() / 1000),
//!                 (long long)(d.max().count() / 1000), (unsigned long long)d.count());
//!
//! Buckets are log-linear, as in HdrHistogram: below 16 ns one per nanosecond, above it
//! eight per power of two, so a bucket's width is at most 1/8 of its lower bound and a
//! percentile read from it is within 12.5 % of the true value (it reports the bucket's
//! highest value, never more than max()). The last bucket holds everything from about half
//! an hour up. count(), sum() and max() are exact. Histograms of the same kind add up
//! (operator+=): a runtime's is the sum of its workers'.
//! @file
#pragma once

#include <array>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace eddy {

/// A distribution of durations: 8 buckets per power of two, so each bucket spans at most
/// 1/8 of its lower bound (a percentile is within 12.5 %), in a fixed 2.5 KB array.
class DurationHistogram {
public:
    /// Buckets 0..15 hold 0..15 ns; then eight per power of two, up to the last one, which
    /// holds everything from 15 x 2^37 ns (about 34 minutes) up.
    static constexpr std::size_t kBuckets = 312;

    /// The bucket of a duration of `ns` nanoseconds.
    static constexpr std::size_t bucket_of(std::uint64_t ns) noexcept {
        if (ns < 16) return static_cast<std::size_t>(ns);
        const int e = static_cast<int>(std::bit_width(ns)) - 1;  // 2^e <= ns < 2^(e+1), e >= 4
        const std::size_t i = static_cast<std::size_t>(e - 2) * 8 + ((ns >> (e - 3)) & 7);
        return i < kBuckets ? i : kBuckets - 1;
    }
    /// The smallest duration that falls into bucket `i`.
    static constexpr std::chrono::nanoseconds bucket_lower(std::size_t i) noexcept {
        if (i < 16) return std::chrono::nanoseconds(static_cast<std::int64_t>(i));
        const std::size_t e = i / 8 + 2;
        return std::chrono::nanoseconds(static_cast<std::int64_t>((8 + i % 8) << (e - 3)));
    }

    /// Adds one duration (negative ones count as 0).
    void record(std::chrono::nanoseconds d) noexcept {
        const std::uint64_t ns = d.count() > 0 ? static_cast<std::uint64_t>(d.count()) : 0;
        ++buckets_[bucket_of(ns)];
        ++count_;
        sum_ns_ += ns;
        if (ns > max_ns_) max_ns_ = ns;
    }
    /// Adds `o`'s durations to these (how RuntimeMetrics sums the workers').
    DurationHistogram& operator+=(const DurationHistogram& o) noexcept {
        for (std::size_t i = 0; i < kBuckets; ++i) buckets_[i] += o.buckets_[i];
        count_ += o.count_;
        sum_ns_ += o.sum_ns_;
        if (o.max_ns_ > max_ns_) max_ns_ = o.max_ns_;
        return *this;
    }

    std::uint64_t count() const noexcept { return count_; }  ///< durations recorded
    std::uint64_t bucket(std::size_t i) const noexcept {
        return buckets_[i];
    }  ///< durations recorded in bucket `i` (0..kBuckets-1; see bucket_lower)
    std::chrono::nanoseconds sum() const noexcept { return ns(sum_ns_); }  ///< their total
    std::chrono::nanoseconds max() const noexcept { return ns(max_ns_); }  ///< the longest (0 when empty)
    std::chrono::nanoseconds mean() const noexcept {
        return ns(count_ == 0 ? 0 : sum_ns_ / count_);
    }  ///< sum() / count(), 0 when empty
    /// The duration that a fraction `q` (0..1) of the recorded ones do not exceed, to the
    /// bucket's precision: percentile(0.5) is the median, percentile(0.99) the p99. 0 when
    /// empty.
    std::chrono::nanoseconds percentile(double q) const noexcept {
        if (count_ == 0) return ns(0);
        const double clamped = q < 0 ? 0 : q > 1 ? 1 : q;
        std::uint64_t rank = static_cast<std::uint64_t>(clamped * static_cast<double>(count_) + 0.999999);
        if (rank == 0) rank = 1;
        std::uint64_t seen = 0;
        for (std::size_t i = 0; i < kBuckets; ++i) {
            seen += buckets_[i];
            if (seen >= rank) {
                if (i + 1 == kBuckets) return max();
                const std::uint64_t highest = static_cast<std::uint64_t>(bucket_lower(i + 1).count()) - 1;
                return ns(highest < max_ns_ ? highest : max_ns_);
            }
        }
        return max();
    }

    /// Raw setters for the runtime's snapshots (metrics()): not for users.
    /// @{
    void set_raw(std::size_t bucket, std::uint64_t n) noexcept { buckets_[bucket] = n; }
    void set_totals(std::uint64_t count, std::uint64_t sum_ns, std::uint64_t max_ns) noexcept {
        count_ = count;
        sum_ns_ = sum_ns;
        max_ns_ = max_ns;
    }
    /// @}

private:
    static std::chrono::nanoseconds ns(std::uint64_t v) noexcept {
        return std::chrono::nanoseconds(static_cast<std::int64_t>(v));
    }

    std::array<std::uint64_t, kBuckets> buckets_{};
    std::uint64_t count_ = 0;
    std::uint64_t sum_ns_ = 0;
    std::uint64_t max_ns_ = 0;
};

}  // namespace eddy
