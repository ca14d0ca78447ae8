// io/time/timer_wheel.hpp: the timers of one worker, as a hierarchical timing wheel in front of
// an exact heap. A plain data structure: TimerQueue (timer_queue.hpp) locks it.
//
// # Why a wheel, and why a heap behind it
// Most timers never fire: a per-read deadline is armed and disarmed again microseconds
// later. A wheel arms and disarms in O(1) (link into, or unlink from, a slot's list) without
// touching any other timer. Only the timers that come due pass through the heap, a pairing
// heap on the exact deadline: nothing fires before its deadline, and nothing needs more
// than the heap's precision. (A pairing heap for everything cost the reactor a merge of every
// timer armed since its last pop: measured 240 ns per timer on the timers benchmark, and the
// worker waited on its lock meanwhile.)
//
// # The wheel
// Time is counted in ticks of 2^16 ns (65.5 us). kLevels levels of 64 slots: level L holds
// timers due 64^L to 64^(L+1) ticks away (level 0: within 4.2 ms; level 5: up to 52 days;
// farther deadlines wait in the last level and come back around). A timer's level is the
// highest 6-bit group in which its tick differs from `elapsed_`, the last tick processed, and
// its slot that group's value (as in Tokio's driver; tokio/src/runtime/time/wheel). When a
// slot comes due, its timers are inserted again: into a lower level, or, once their tick is
// due, into the heap. Each occupied slot is a bit in a 64-bit mask per level, so the next one
// is found with a rotate and a count of trailing zeros.
//
// # Lifetime
// Entries live in their awaiters; every link is intrusive. TimerEntry::level says where an
// entry is: kNear (the heap) or a wheel level (then `slot` is its slot).
#pragma once

#include "private.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>

#include <eddy/time/detail/timer.hpp>

namespace eddy::detail {

class TimerWheel {
public:
    static constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();
    static constexpr int kTickShift = 16;  // a tick is 65,536 ns
    static constexpr int kLevelBits = 6;   // 64 slots per level
    static constexpr int kLevels = 6;
    static constexpr std::uint8_t kNear = 0xff;  // TimerEntry::level of an entry in the heap

    /// `now_ns`: steady clock; deadlines earlier than it go straight to the heap.
    explicit TimerWheel(std::int64_t now_ns) noexcept : elapsed_(tick_of(now_ns)) {}
    TimerWheel(const TimerWheel&) = delete;
    TimerWheel& operator=(const TimerWheel&) = delete;

    bool empty() const noexcept { return near_ == nullptr && occupied_any() == 0; }

    /// Adds `e` (by e->deadline_ns). Returns the earliest time at which `e` needs the
    /// reactor: its deadline in the heap, else its slot's start (never after its deadline).
    std::int64_t insert(TimerEntry* e) noexcept;
    /// Takes `e` out, wherever it is.
    void remove(TimerEntry* e) noexcept;

    /// The earliest time anything here may need the reactor (kNone: never): the heap's
    /// earliest deadline, or the start of the next occupied slot, whichever comes first.
    std::int64_t next_wake() const noexcept;

    /// Moves the slots due by `now_ns` toward the heap, then takes up to `max` entries due by
    /// `now_ns` out of the heap, earliest first, calling f(entry) for each. Returns how many.
    template <class F>
    std::size_t pop_expired(std::int64_t now_ns, std::size_t max, F&& f) {
        advance(tick_of(now_ns));
        std::size_t n = 0;
        while (near_ != nullptr && near_->deadline_ns <= now_ns && n < max) {
            TimerEntry* e = near_;
            near_ = merge_pairs(e->child);
            e->child = e->next = e->prev = nullptr;
            f(*e);
            ++n;
        }
        return n;
    }

    /// Takes every entry out, calling f(entry) for each (shutdown).
    template <class F>
    void take_all(F&& f) {
        for (int level = 0; level < kLevels; ++level) {
            for (TimerEntry*& head : slots_[level]) {
                for (TimerEntry* e = head; e != nullptr;) {
                    TimerEntry* next = e->next;
                    e->next = e->prev = nullptr;
                    f(*e);
                    e = next;
                }
                head = nullptr;
            }
            occupied_[level] = 0;
        }
        // The heap, depth first through the child and sibling links.
        TimerEntry* stack = near_;
        near_ = nullptr;
        while (stack != nullptr) {
            TimerEntry* e = stack;
            stack = e->next;
            for (TimerEntry* c = e->child; c != nullptr;) {
                TimerEntry* sibling = c->next;
                c->next = stack;
                stack = c;
                c = sibling;
            }
            e->child = e->next = e->prev = nullptr;
            f(*e);
        }
    }

private:
    struct Slot {
        int level;
        int slot;
        std::uint64_t tick;  // when it comes due
    };

    static std::uint64_t tick_of(std::int64_t ns) noexcept {
        return ns <= 0 ? 0 : static_cast<std::uint64_t>(ns) >> kTickShift;
    }
    std::uint64_t occupied_any() const noexcept {
        std::uint64_t any = 0;
        for (std::uint64_t o : occupied_) any |= o;
        return any;
    }
    /// The next occupied slot, lowest level first (a lower level's slots all come before a
    /// higher level's next one); false when the wheel is empty.
    bool next_slot(Slot& out) const noexcept;
    void advance(std::uint64_t now_tick) noexcept;
    void link(TimerEntry* e, int level, int slot) noexcept;

    // The heap (pairing heap on deadline_ns, intrusive: child, next sibling, previous sibling
    // or parent).
    static TimerEntry* meld(TimerEntry* a, TimerEntry* b) noexcept;
    static TimerEntry* merge_pairs(TimerEntry* first) noexcept;
    void remove_near(TimerEntry* e) noexcept;

    std::uint64_t elapsed_;  // every wheel entry's tick is later than this
    TimerEntry* slots_[kLevels][1 << kLevelBits] = {};
    std::uint64_t occupied_[kLevels] = {};
    TimerEntry* near_ = nullptr;
};

}  // namespace eddy::detail
