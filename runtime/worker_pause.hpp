// runtime/worker_pause.hpp: stopping every worker between two polls, for a task dump.
//
// A dump (runtime/task_dump.cpp) must read suspended frames while no worker can resume or
// destroy them. So the dumper makes the pause generation odd, wakes every worker, and waits
// until each has acknowledged that generation at a pause point: a worker calls point() before
// each poll (holding the task it is about to run, which the dump then reports as runnable)
// and each time it wakes in park(), and there writes the generation into its own slot and
// sleeps until the generation moves on. A dump from a task (eddy::dump_tasks) runs on a
// worker in the middle of its poll: it waits for the others only. Dumpers take turns in the
// order they came (a ticket each: a thread dumping in a loop cannot starve a dumping task);
// one waiting for its turn on a worker acknowledges the running dump meanwhile, so two
// dumping tasks cannot wait for each other.
//
// A worker stuck in one long poll would hold a dump forever, and that is when someone wants
// one: pause() gives up after its patience (the workers that did stop go on at once) and
// names the workers that did not acknowledge; the dump is then partial (task_dump.hpp). It
// gives up too if the runtime starts shutting down (workers leaving their run loop never
// acknowledge). A late acknowledgement carries its own generation, so it never counts for a
// later dump.
//
// Cost when nobody dumps: one relaxed load of gen_ per poll, on a line the workers only read.
#pragma once

#include "private.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace eddy::detail {

class Parker;

class WorkerPause {
public:
    /// For `workers` workers; `stopping` is the scheduler's stop flag (a dump gives up when
    /// it is set). The workers' parkers come with attach(), once the workers exist.
    WorkerPause(std::size_t workers, const std::atomic<bool>& stopping);
    /// The parkers of the workers, in index order (pause() wakes every worker through them).
    void attach(std::vector<Parker*> parkers) noexcept { parkers_ = std::move(parkers); }

    /// Worker `index`, between two polls (`held`: the task it is about to run) and after
    /// each wake in park() (`held` null).
    void point(std::size_t index, void* held) noexcept {
        // Relaxed: a hint; wait_out() reads it again with acquire. The dumper wakes every
        // worker after making it odd, so a parked one reaches this line and sees it.
        if ((gen_.load(std::memory_order_relaxed) & 1) != 0) [[unlikely]]
            wait_out(index, held);
    }

    /// The dumper: pauses every worker but the calling one (`self`, when the
    /// dumper is a worker) for at most `patience`. Returns the workers that did not stop
    /// (empty: all did; then call resume() after the walk); with some left running, the
    /// others were let go already. RuntimeStopped-worthy: false in `ok` when the runtime
    /// started shutting down first (nothing is paused then).
    struct Outcome {
        bool ok = true;
        std::vector<std::size_t> busy;
    };
    Outcome pause(const std::size_t* self, std::chrono::nanoseconds patience);
    /// The dumper, after a pause() that stopped every worker: lets them go (gen_ even again,
    /// sleepers woken, the next dumper's turn). pause() calls it itself when it gives up.
    void resume() noexcept;

    /// While paused: the task worker `i` held when it stopped (null: none).
    void* held(std::size_t i) const noexcept { return slots_[i].held; }

private:
    void wait_out(std::size_t index, void* held) noexcept;
    bool stopping() const noexcept { return stopping_.load(std::memory_order_relaxed); }  // a hint, as for the workers

    const std::atomic<bool>& stopping_;
    std::vector<Parker*> parkers_;

    struct alignas(64) Slot {
        // The generation this worker last stopped for. Release store by the worker (what it
        // did to the frames it ran happens before the walk) pairs with the dumper's acquire
        // load in pause().
        std::atomic<std::uint32_t> acked{0};
        void* held = nullptr;  // written before the release store above, read after its acquire
    };

    // One dump at a time, first come first served: a dumper takes next_ticket_ (relaxed: the
    // ticket only orders the dumpers) and waits until serving_ shows it; resume() passes the
    // turn on (release increment, paired with the acquire load of the next dumper: the
    // previous dump's writes to the slots happen before).
    std::atomic<std::uint64_t> next_ticket_{0};
    std::atomic<std::uint64_t> serving_{0};
    // Odd while a dump wants the workers paused; a futex word (paused workers sleep on it).
    // Release increments (resume()) pair with the acquire loads in wait_out(); the seq_cst
    // increment in pause() is ordered before the unparks that make parked workers look.
    alignas(64) std::atomic<std::uint32_t> gen_{0};
    static_assert(sizeof(std::atomic<std::uint32_t>) == 4, "gen_ is a futex word");
    std::unique_ptr<Slot[]> slots_;
};

}  // namespace eddy::detail
