// runtime/task_registry.hpp: every spawned task that has not finished yet.
//
// Shutdown must destroy every unfinished task, including those suspended where no queue can
// see them (awaiting a JoinHandle, a when_all, later I/O). So each spawned root frame is
// linked here (intrusively, through its FrameHeader) from spawn until it completes.
//
// Sharded: a spawn links into the spawning worker's shard and the completion unlinks from
// the shard recorded in the header, each under that shard's spin lock; workers mostly touch
// different shards. Tokio keeps the same list (OwnedTasks), behind one mutex in 1.24.
#pragma once

#include "private.hpp"
#include <eddy/tasks/detail/spin_lock.hpp>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include <eddy/tasks/detail/frame_header.hpp>

namespace eddy::detail {

class TaskRegistry {
public:
    /// Links `h` into shard `hint % kShards`.
    void insert(FrameHeader* h, std::size_t hint) noexcept;
    /// Unlinks `h` (from the shard recorded in it).
    void remove(FrameHeader* h) noexcept;
    /// Unlinks and returns every registered task. Called at shutdown, with no worker running.
    std::vector<FrameHeader*> take_all();
    /// Every registered task, shard by shard (a task dump, with the workers paused).
    std::vector<FrameHeader*> snapshot() const;
    /// f(h) for every registered task, under its shard's lock (h cannot be unregistered, and
    /// so not freed, meanwhile): a partial task dump, with workers running.
    template <class F>
    void for_each_locked(F&& f) const {
        for (const Shard& s : shards_) {
            std::lock_guard lock(s.lock);
            for (FrameHeader* h = s.head; h != nullptr; h = h->next) f(h);
        }
    }
    /// Tasks linked right now (an estimate while workers run).
    std::size_t size() const noexcept;

private:
    // 16 shards: a guess sized for "a few workers"; each is one cache line.
    static constexpr std::size_t kShards = 16;
    struct alignas(64) Shard {
        mutable SpinLock lock;
        FrameHeader* head = nullptr;        // guarded by lock
        std::atomic<std::size_t> count{0};  // written under lock, read anywhere (metrics)
    };
    static_assert(kShards <= 256, "FrameHeader::shard is one byte");
    std::array<Shard, kShards> shards_;
};

}  // namespace eddy::detail
