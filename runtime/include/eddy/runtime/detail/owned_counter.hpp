// eddy/runtime/detail/owned_counter.hpp: OwnedCounter, a statistic with one writer and any
// number of readers (the workers' and the reactor's figures). Not for users.
#pragma once

#include <atomic>
#include <cstdint>

namespace eddy::detail {

/// Written by one thread only (a worker, or the reactor thread), read by any (metrics()).
/// The writer uses a relaxed load and store rather than a read-modify-write: nobody else
/// writes, so no increment is lost, and the add stays a plain add on the hot path. Readers
/// get a value that is recent, not synchronized with anything (a snapshot of statistics).
class OwnedCounter {
public:
    void add(std::uint64_t n = 1) noexcept {
        value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    }
    /// For gauges: the current value.
    void set(std::uint64_t v) noexcept { value_.store(v, std::memory_order_relaxed); }
    std::uint64_t get() const noexcept { return value_.load(std::memory_order_relaxed); }

private:
    std::atomic<std::uint64_t> value_{0};
};

}  // namespace eddy::detail
