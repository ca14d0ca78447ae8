// runtime/task_registry.cpp: see task_registry.hpp.
#include "task_registry.hpp"

#include <algorithm>
#include <mutex>

namespace eddy::detail {

void TaskRegistry::insert(FrameHeader* h, std::size_t hint) noexcept {
    const auto index = static_cast<std::uint8_t>(hint % kShards);
    Shard& s = shards_[index];
    h->shard = index;
    std::lock_guard lock(s.lock);
    h->prev = nullptr;
    h->next = s.head;
    if (s.head != nullptr) s.head->prev = h;
    s.head = h;
    s.count.store(s.count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void TaskRegistry::remove(FrameHeader* h) noexcept {
    Shard& s = shards_[h->shard];
    std::lock_guard lock(s.lock);
    if (h->prev != nullptr) {
        h->prev->next = h->next;
    } else {
        s.head = h->next;
    }
    if (h->next != nullptr) h->next->prev = h->prev;
    h->prev = h->next = nullptr;
    s.count.store(s.count.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
}

std::vector<FrameHeader*> TaskRegistry::take_all() {
    std::vector<FrameHeader*> all;
    for (Shard& s : shards_) {
        std::lock_guard lock(s.lock);
        for (FrameHeader* h = s.head; h != nullptr;) {
            FrameHeader* next = h->next;
            h->prev = h->next = nullptr;
            all.push_back(h);
            h = next;
        }
        s.head = nullptr;
        s.count.store(0, std::memory_order_relaxed);
    }
    return all;
}

std::vector<FrameHeader*> TaskRegistry::snapshot() const {
    std::vector<FrameHeader*> all;
    for (const Shard& s : shards_) {
        std::lock_guard lock(s.lock);
        const std::size_t first = all.size();
        for (FrameHeader* h = s.head; h != nullptr; h = h->next) all.push_back(h);
        std::reverse(all.begin() + static_cast<std::ptrdiff_t>(first), all.end());  // oldest first
    }
    return all;
}

std::size_t TaskRegistry::size() const noexcept {
    std::size_t n = 0;
    for (const Shard& s : shards_) n += s.count.load(std::memory_order_relaxed);
    return n;
}

}  // namespace eddy::detail
