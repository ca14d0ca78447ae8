// runtime/worker_pause.cpp: see worker_pause.hpp.
#include "runtime/worker_pause.hpp"

#include "runtime/scheduler.hpp"
#include "runtime/worker.hpp"

#include <chrono>
#include <thread>

namespace eddy::detail {

void WorkerPause::wait_out() noexcept {
    const std::uint32_t g = gen_.load(std::memory_order_acquire);
    if ((g & 1) == 0) return;
    acks_.fetch_add(1, std::memory_order_release);
    acks_.notify_one();
    gen_.wait(g, std::memory_order_acquire);  // until resume()
}

bool WorkerPause::pause(Scheduler& sched, bool from_worker) {
    using namespace std::chrono_literals;
    // A dumping worker that waits for its turn acknowledges the dump in progress: otherwise
    // that dump would wait for it, and it for that dump.
    while (!dumpers_.try_lock()) {
        if (from_worker) point();
        std::this_thread::sleep_for(50us);
        if (sched.stopping()) return false;
    }
    acks_.store(0, std::memory_order_relaxed);  // no worker acknowledges before gen_ is odd
    gen_.fetch_add(1, std::memory_order_seq_cst);
    const std::size_t n = sched.num_workers();
    for (std::size_t i = 0; i < n; ++i) sched.worker(i).parker().unpark();
    const std::uint32_t need = static_cast<std::uint32_t>(n - (from_worker ? 1 : 0));
    for (;;) {
        const std::uint32_t seen = acks_.load(std::memory_order_acquire);
        if (seen >= need) return true;
        if (sched.stopping()) {
            resume();
            return false;
        }
        std::this_thread::sleep_for(20us);  // a dump is rare: no need for a futex here
    }
}

void WorkerPause::resume() noexcept {
    gen_.fetch_add(1, std::memory_order_release);
    gen_.notify_all();
    dumpers_.unlock();
}

} // namespace eddy::detail
