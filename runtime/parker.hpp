// runtime/parker.hpp: how one worker thread sleeps and is woken.
//
// A three-state latch over a futex (C++20 atomic wait/notify, a futex on Linux):
//   kEmpty    running, no pending notification
//   kParked   asleep (or about to be) in park()
//   kNotified an unpark() arrived; the next park() returns at once and consumes it
// An unpark() before park() is never lost: it leaves kNotified behind. unpark() is a swap,
// not a CAS, because its release store must happen even when the state is already kNotified
// (the parked side's acquire must see everything done before *this* unpark).
#pragma once

#include "runtime/private.hpp"

#include <atomic>
#include <cstdint>

namespace eddy::detail {

class Parker {
public:
    /// Owner thread: sleeps until unpark() (returns at once if one is pending).
    void park() noexcept {
        std::uint32_t expected = kNotified;
        // Acquire: pairs with the release exchange in unpark().
        if (state_.compare_exchange_strong(expected, kEmpty, std::memory_order_acquire)) return;
        if (!state_.compare_exchange_strong(expected, kParked, std::memory_order_relaxed)) {
            // expected was kEmpty and the state changed under us: it can only be kNotified.
            state_.exchange(kEmpty, std::memory_order_acquire);  // acquire: pairs with unpark()
            return;
        }
        for (;;) {
            state_.wait(kParked, std::memory_order_relaxed);
            expected = kNotified;
            // Acquire: pairs with the release exchange in unpark().
            if (state_.compare_exchange_strong(expected, kEmpty, std::memory_order_acquire)) return;
            // Spurious wake-up: still kParked.
        }
    }

    /// Any thread: wakes the owner, or makes its next park() return at once.
    void unpark() noexcept {
        // Release: pairs with the acquire CAS/exchange in park().
        if (state_.exchange(kNotified, std::memory_order_release) == kParked) state_.notify_one();
    }

private:
    static constexpr std::uint32_t kEmpty = 0;
    static constexpr std::uint32_t kParked = 1;
    static constexpr std::uint32_t kNotified = 2;
    std::atomic<std::uint32_t> state_{kEmpty};
};

} // namespace eddy::detail
