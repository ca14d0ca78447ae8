// runtime/parker.hpp: how one worker thread sleeps and is woken.
//
// A three-state latch over a raw Linux futex (not std::atomic::wait: libstdc++ 12 skips the
// wake when its own waiter count reads zero, an extra protocol we do not need; the futex's
// kernel-side value check alone makes a wake-up impossible to lose):
//   kEmpty    running, no pending notification
//   kParked   asleep (or about to be) in park()
//   kNotified an unpark() arrived; the next park() returns at once and consumes it
// An unpark() before park() is never lost: it leaves kNotified behind. unpark() is a swap,
// not a CAS, because its release store must happen even when the state is already kNotified
// (the parked side's acquire must see everything done before *this* unpark).
#pragma once

#include "private.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

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
            // Sleeps only while the word still reads kParked (checked by the kernel).
            syscall(SYS_futex, &state_, FUTEX_WAIT_PRIVATE, kParked, nullptr, nullptr, 0);
            expected = kNotified;
            // Acquire: pairs with the release exchange in unpark().
            if (state_.compare_exchange_strong(expected, kEmpty, std::memory_order_acquire)) return;
            // Spurious wake-up: still kParked.
        }
    }

    /// Any thread: wakes the owner, or makes its next park() return at once.
    void unpark() noexcept {
        // Release: pairs with the acquire CAS/exchange in park().
        if (state_.exchange(kNotified, std::memory_order_release) == kParked)
            syscall(SYS_futex, &state_, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
    }

private:
    static constexpr std::uint32_t kEmpty = 0;
    static constexpr std::uint32_t kParked = 1;
    static constexpr std::uint32_t kNotified = 2;
    std::atomic<std::uint32_t> state_{kEmpty};
    static_assert(sizeof(std::atomic<std::uint32_t>) == 4, "the futex word is 32 bits");
};

}  // namespace eddy::detail
