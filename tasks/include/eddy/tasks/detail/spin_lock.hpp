// eddy/tasks/detail/spin_lock.hpp: a test-and-test-and-set lock for very short critical sections.
//
// Used where the critical section is a few pointer writes (frees into the frame pool of an
// exited thread, the task registry, the sleeper list, the wait queues of the primitives:
// eddy/runtime/detail/wait_queue.hpp, a socket's waiters, a worker's timer queue) and a
// std::mutex's futex path would cost more than the work. It lives in the bottom layer so that
// the frame pool (tasks/frame_pool.cpp) and every layer above can take it. Yields the CPU
// after a bounded spin so that oversubscribed runs (8 workers on 2 cores, as in the stress
// suite) do not spin against a preempted holder. Not for users: no stability promise.
#pragma once

#include <atomic>
#include <sched.h>

namespace eddy::detail {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

class SpinLock {
public:
    void lock() noexcept {
        // Acquire: pairs with the release store in unlock().
        while (locked_.exchange(true, std::memory_order_acquire)) {
            for (int spins = 0; locked_.load(std::memory_order_relaxed); ++spins) {
                if (spins < 64) {
                    cpu_relax();
                } else {
                    sched_yield();
                }
            }
        }
    }
    void unlock() noexcept {
        locked_.store(false, std::memory_order_release);  // release: pairs with lock()'s exchange
    }

private:
    std::atomic<bool> locked_{false};
};

}  // namespace eddy::detail
