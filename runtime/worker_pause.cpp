// runtime/worker_pause.cpp: see worker_pause.hpp.
#include "worker_pause.hpp"

#include "parker.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <thread>

namespace eddy::detail {

WorkerPause::WorkerPause(std::size_t workers, const std::atomic<bool>& stopping)
    : stopping_(stopping), slots_(std::make_unique<Slot[]>(workers)) {}

void WorkerPause::wait_out(std::size_t index, void* held) noexcept {
    const std::uint32_t g = gen_.load(std::memory_order_acquire);
    if ((g & 1) == 0) return;
    Slot& slot = slots_[index];
    slot.held = held;
    slot.acked.store(g, std::memory_order_release);
    // Until the generation moves on. A raw futex, not std::atomic::wait: libstdc++ 12's notify
    // can skip the wake when it reads its own waiter count as zero (runtime/parker.hpp); the
    // kernel's check of the word alone cannot lose one.
    while (gen_.load(std::memory_order_acquire) == g)
        syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&gen_), FUTEX_WAIT_PRIVATE, g, nullptr, nullptr, 0);
    slot.held = nullptr;
}

WorkerPause::Outcome WorkerPause::pause(const std::size_t* self, std::chrono::nanoseconds patience) {
    using namespace std::chrono_literals;
    // A dumping worker that waits for its turn stops for the dump in progress: otherwise that
    // dump would wait for it, and it for that dump. Every ticket is served, even once the
    // runtime stops (the dumpers ahead give up at once then): skipping one would stall the rest.
    const std::uint64_t ticket = next_ticket_.fetch_add(1, std::memory_order_relaxed);
    while (serving_.load(std::memory_order_acquire) != ticket) {
        if (self != nullptr) point(*self, nullptr);
        std::this_thread::sleep_for(20us);
    }
    if (stopping()) {
        serving_.fetch_add(1, std::memory_order_release);
        return {false, {}};
    }
    const auto give_up = std::chrono::steady_clock::now() + patience;          // from our turn on
    const std::uint32_t g = gen_.fetch_add(1, std::memory_order_seq_cst) + 1;  // odd
    const std::size_t n = parkers_.size();
    for (Parker* p : parkers_) p->unpark();
    // A dump is rare: poll the slots rather than make every worker wake the dumper.
    for (;;) {
        Outcome out;
        for (std::size_t i = 0; i < n; ++i)
            if ((self == nullptr || *self != i) && slots_[i].acked.load(std::memory_order_acquire) != g)
                out.busy.push_back(i);
        if (out.busy.empty()) return out;
        if (stopping()) {
            resume();
            return {false, {}};
        }
        if (std::chrono::steady_clock::now() >= give_up) {
            resume();
            return out;
        }
        std::this_thread::sleep_for(20us);
    }
}

void WorkerPause::resume() noexcept {
    gen_.fetch_add(1, std::memory_order_release);
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&gen_), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
    serving_.fetch_add(1, std::memory_order_release);
}

}  // namespace eddy::detail
