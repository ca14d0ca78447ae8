// tests/runtime/histogram_test.cpp: eddy::DurationHistogram (eddy/runtime/histogram.hpp), the
// type RuntimeMetrics reports the scheduling delay in: its buckets, percentiles and sums.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>

#include <eddy/runtime/histogram.hpp>

using eddy::DurationHistogram;
using std::chrono::microseconds;
using std::chrono::nanoseconds;

namespace {

std::int64_t lower(std::size_t i) { return DurationHistogram::bucket_lower(i).count(); }

}  // namespace

TEST_SUITE("runtime/histogram") {

TEST_CASE("every duration falls into the bucket whose bounds hold it, and a bucket is at most 1/8 wide") {
    for (std::uint64_t v = 0; v < 16; ++v) CHECK(DurationHistogram::bucket_of(v) == v);
    std::uint64_t checked = 0;
    for (std::uint64_t base = 16; base < (std::uint64_t{1} << 39); base += base / 7 + 1) {
        for (std::uint64_t v : {base, base + 1, base * 2 - 1}) {
            const std::size_t i = DurationHistogram::bucket_of(v);
            REQUIRE(i + 1 < DurationHistogram::kBuckets);
            CHECK(lower(i) <= static_cast<std::int64_t>(v));
            CHECK(static_cast<std::int64_t>(v) < lower(i + 1));
            CHECK((lower(i + 1) - lower(i)) * 8 <= lower(i));
            ++checked;
        }
    }
    CHECK(checked > 300);
    // Beyond the range: the last bucket.
    CHECK(DurationHistogram::bucket_of(~std::uint64_t{0}) == DurationHistogram::kBuckets - 1);
}

TEST_CASE("count, sum, mean and max are exact; percentiles are within a bucket") {
    DurationHistogram h;
    CHECK(h.count() == 0);
    CHECK(h.percentile(0.99) == nanoseconds(0));
    for (int us = 1; us <= 1000; ++us) h.record(microseconds(us));
    CHECK(h.count() == 1000);
    CHECK(h.sum() == microseconds(500'500));
    CHECK(h.mean() == nanoseconds(500'500));
    CHECK(h.max() == microseconds(1000));
    const auto within = [](nanoseconds got, std::int64_t want_ns) {
        return got.count() >= want_ns && got.count() <= want_ns + want_ns / 8;
    };
    CHECK(within(h.percentile(0.5), 500'000));
    CHECK(within(h.percentile(0.99), 990'000));
    CHECK(h.percentile(1.0) == h.max());      // never beyond the largest recorded
    CHECK(within(h.percentile(0.0), 1'000));  // the smallest
}

TEST_CASE("histograms add up; negative durations count as zero") {
    DurationHistogram a, b;
    a.record(microseconds(10));
    a.record(nanoseconds(-5));
    b.record(std::chrono::milliseconds(3));
    a += b;
    CHECK(a.count() == 3);
    CHECK(a.max() == std::chrono::milliseconds(3));
    CHECK(a.bucket(0) == 1);  // the negative one
    CHECK(a.sum() == microseconds(3010));
    CHECK(a.percentile(0.34) >= microseconds(10));
    CHECK(a.percentile(0.34) < microseconds(12));
}

}  // TEST_SUITE("runtime/histogram")
