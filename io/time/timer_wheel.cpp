// io/time/timer_wheel.cpp: see timer_wheel.hpp.
#include "time/timer_wheel.hpp"

#include <algorithm>
#include <bit>
#include <utility>

namespace eddy::detail {
namespace {

constexpr std::uint64_t kSlotMask = (std::uint64_t{1} << TimerWheel::kLevelBits) - 1;
// The farthest tick the wheel can tell apart from `elapsed_`; later deadlines wait in the
// last level and are inserted again when that slot comes due.
constexpr std::uint64_t kMaxSpan = (std::uint64_t{1} << (TimerWheel::kLevelBits * TimerWheel::kLevels)) - 1;

int level_for(std::uint64_t elapsed, std::uint64_t when) noexcept {
    // The highest 6-bit group in which they differ (the low group forced on, so that a tick
    // that differs only there is level 0).
    const std::uint64_t masked = (elapsed ^ when) | kSlotMask;
    const int significant = 63 - std::countl_zero(masked);
    return std::min(significant / TimerWheel::kLevelBits, TimerWheel::kLevels - 1);
}

}  // namespace

std::int64_t TimerWheel::insert(TimerEntry* e) noexcept {
    e->child = e->next = e->prev = nullptr;
    const std::uint64_t tick = tick_of(e->deadline_ns);
    if (tick <= elapsed_) {
        e->level = kNear;
        near_ = meld(near_, e);
        return e->deadline_ns;
    }
    const std::uint64_t when = std::min(tick, elapsed_ + kMaxSpan);
    const int level = level_for(elapsed_, when);
    const int shift = level * kLevelBits;
    link(e, level, static_cast<int>((when >> shift) & kSlotMask));
    // The slot comes due when `elapsed_` reaches its start: `when` without the lower groups.
    const std::uint64_t due = when & ~((std::uint64_t{1} << shift) - 1);
    return static_cast<std::int64_t>(std::min<std::uint64_t>(due << kTickShift, static_cast<std::uint64_t>(kNone)));
}

void TimerWheel::link(TimerEntry* e, int level, int slot) noexcept {
    TimerEntry*& head = slots_[level][slot];
    e->level = static_cast<std::uint8_t>(level);
    e->slot = static_cast<std::uint8_t>(slot);
    e->prev = nullptr;
    e->next = head;
    if (head != nullptr) head->prev = e;
    head = e;
    occupied_[level] |= std::uint64_t{1} << slot;
}

void TimerWheel::remove(TimerEntry* e) noexcept {
    if (e->level == kNear) {
        remove_near(e);
        return;
    }
    TimerEntry*& head = slots_[e->level][e->slot];
    (e->prev != nullptr ? e->prev->next : head) = e->next;
    if (e->next != nullptr) e->next->prev = e->prev;
    if (head == nullptr) occupied_[e->level] &= ~(std::uint64_t{1} << e->slot);
    e->next = e->prev = nullptr;
}

bool TimerWheel::next_slot(Slot& out) const noexcept {
    for (int level = 0; level < kLevels; ++level) {
        const std::uint64_t occupied = occupied_[level];
        if (occupied == 0) continue;
        const int shift = level * kLevelBits;
        const std::uint64_t slot_range = std::uint64_t{1} << shift;
        const std::uint64_t level_range = slot_range << kLevelBits;
        const int now_slot = static_cast<int>((elapsed_ >> shift) & kSlotMask);
        // The first occupied slot at or after the current one, going round.
        const int slot = (std::countr_zero(std::rotr(occupied, now_slot)) + now_slot) & static_cast<int>(kSlotMask);
        std::uint64_t tick = (elapsed_ & ~(level_range - 1)) + static_cast<std::uint64_t>(slot) * slot_range;
        if (tick <= elapsed_) tick += level_range;  // the wheel went round: the slot is in the next turn
        out = Slot{level, slot, tick};
        return true;
    }
    return false;
}

std::int64_t TimerWheel::next_wake() const noexcept {
    std::int64_t wake = near_ != nullptr ? near_->deadline_ns : kNone;
    Slot s;
    if (next_slot(s)) {
        const std::uint64_t at = s.tick << kTickShift;
        if (at < static_cast<std::uint64_t>(wake)) wake = static_cast<std::int64_t>(at);
    }
    return wake;
}

void TimerWheel::advance(std::uint64_t now_tick) noexcept {
    Slot s;
    while (next_slot(s) && s.tick <= now_tick) {
        TimerEntry* list = std::exchange(slots_[s.level][s.slot], nullptr);
        occupied_[s.level] &= ~(std::uint64_t{1} << s.slot);
        elapsed_ = s.tick;
        // Every entry goes down a level at least, or into the heap once its tick is due.
        while (list != nullptr) {
            TimerEntry* next = list->next;
            insert(list);
            list = next;
        }
    }
    if (now_tick > elapsed_) elapsed_ = now_tick;
}

// --- the heap ---------------------------------------------------------------------------------

TimerEntry* TimerWheel::meld(TimerEntry* a, TimerEntry* b) noexcept {
    // Two roots (no siblings, no parent): the later one becomes the first child of the other.
    if (a == nullptr) return b;
    if (b == nullptr) return a;
    if (b->deadline_ns < a->deadline_ns) std::swap(a, b);
    b->prev = a;
    b->next = a->child;
    if (a->child != nullptr) a->child->prev = b;
    a->child = b;
    return a;
}

TimerEntry* TimerWheel::merge_pairs(TimerEntry* first) noexcept {
    // The classic two passes over a list of sibling subtrees: meld them in pairs from the
    // left, then meld the pairs from the right into one tree.
    TimerEntry* pairs = nullptr;  // the melded pairs, most recent first (through next)
    while (first != nullptr) {
        TimerEntry* a = first;
        TimerEntry* b = a->next;
        first = b != nullptr ? b->next : nullptr;
        a->next = a->prev = nullptr;
        if (b != nullptr) b->next = b->prev = nullptr;
        TimerEntry* m = meld(a, b);
        m->next = pairs;
        pairs = m;
    }
    TimerEntry* root = nullptr;
    while (pairs != nullptr) {
        TimerEntry* rest = pairs->next;
        pairs->next = nullptr;
        root = meld(root, pairs);
        pairs = rest;
    }
    return root;
}

void TimerWheel::remove_near(TimerEntry* e) noexcept {
    if (e == near_) {
        near_ = merge_pairs(e->child);
    } else {
        // Cut e's subtree out of its sibling list, then meld its children back in.
        if (e->prev->child == e) {
            e->prev->child = e->next;  // e was the first child of prev
        } else {
            e->prev->next = e->next;
        }
        if (e->next != nullptr) e->next->prev = e->prev;
        near_ = meld(near_, merge_pairs(e->child));
    }
    e->child = e->next = e->prev = nullptr;
}

}  // namespace eddy::detail
