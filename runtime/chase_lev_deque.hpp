// runtime/chase_lev_deque.hpp: one worker's bounded work-stealing deque.
//
// Algorithm: Chase & Lev, "Dynamic Circular Work-Stealing Deque" (SPAA 2005), in the C11 form
// of Lê, Pop, Cohen & Zappa Nardelli, "Correct and Efficient Work-Stealing for Weak Memory
// Models" (PPoPP 2013), with two changes:
//   * Bounded ring, no growth. A full deque tells its owner, who moves half of it to the
//     global injection queue (Worker::push_local). Nothing is ever retired, so there is no
//     reclamation problem.
//   * No standalone fences. The paper's two seq_cst fences (between the store to `bottom` and
//     the load of `top` in pop; between the loads of `top` and `bottom` in steal) become
//     seq_cst operations on those variables. ThreadSanitizer does not model
//     standalone thread fences; it does model seq_cst accesses, so every synchronization
//     here is visible to it. Slots are relaxed atomics: a thief may read a slot the owner is
//     about to reuse, and discards what it read when its CAS on `top` fails.
//   * Items of more than one word. A slot is as many relaxed 64-bit atomic words as the item
//     needs (the run queues hold a task and the time it was woken: queue_item.hpp). The
//     argument above does not depend on the slot's width: the owner writes every word
//     before its release store of `bottom` publishes them, never rewrites a slot a thief
//     may still validate (push's acquire load of `top`), and a thief keeps what it read
//     only when its CAS on `top` succeeds, so it never keeps a torn item.
//
// Thread safety:
//   * Owner thread only: push(), pop(), pop_top_batch(), bottom_index().
//   * Any thread: steal_into(), pop_top(), empty(), size(), top_index().
//
// Indices are 64-bit and only grow (bottom - top is the size), so they never wrap.
//
// The owner/thief race on the last item, by cases (t = top, b = bottom after pop's decrement):
//   t <  b  the owner's item is not the one a thief can reach: no CAS needed.
//   t == b  one item left: owner and thieves CAS top from t to t+1; exactly one wins.
//   t >  b  empty: the owner restores bottom.
// seq_cst on pop's store of bottom and on both loads in steal gives the store-load order the
// fences gave: either the thief sees the decremented bottom, or the owner sees the thief's
// top, or both (never neither).
#pragma once

#include "private.hpp"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <type_traits>

namespace eddy::detail {

template <class T>
class ChaseLevDeque {
    static_assert(std::is_trivially_copyable_v<T> && std::atomic<std::uint64_t>::is_always_lock_free,
                  "items are copied word by word through lock-free atomics");
    static constexpr std::size_t kWords = (sizeof(T) + 7) / 8;

public:
    explicit ChaseLevDeque(std::size_t capacity)
        : mask_(capacity - 1), slots_(std::make_unique<std::atomic<std::uint64_t>[]>(capacity * kWords)) {
        if (capacity < 2 || !std::has_single_bit(capacity))
            throw std::invalid_argument("ChaseLevDeque capacity must be a power of two >= 2");
    }

    std::size_t capacity() const noexcept { return mask_ + 1; }

    /// Owner: adds `x` at the bottom. Returns false (and changes nothing) when full.
    bool push(T x) noexcept {
        const std::int64_t b = bottom_.load(std::memory_order_relaxed);  // owner is its only writer
        // Acquire: pairs with the CAS on top in steal_into()/pop(), so a thief's read of the
        // slot at index t happens before we overwrite that slot (index t + capacity).
        const std::int64_t t = top_.load(std::memory_order_acquire);
        if (b - t > static_cast<std::int64_t>(mask_)) return false;
        store_slot(b, x);
        // Release: publishes the slot (and everything the owner did to the item) to thieves;
        // pairs with the seq_cst load of bottom in steal_into().
        bottom_.store(b + 1, std::memory_order_release);
        return true;
    }

    /// Owner: takes the most recently pushed item (LIFO). Returns false when empty.
    bool pop(T& out) noexcept {
        const std::int64_t b = bottom_.load(std::memory_order_relaxed) - 1;
        // Seq_cst (with the load of top below): the paper's fence. Pairs with steal_into()'s
        // seq_cst loads of top then bottom; see the case analysis at the top of the file.
        bottom_.store(b, std::memory_order_seq_cst);
        std::int64_t t = top_.load(std::memory_order_seq_cst);
        if (t > b) {
            // Empty. Release (not relaxed): a thief that reads this value of bottom must still
            // synchronize with the pushes before it; a relaxed store would break that chain.
            bottom_.store(b + 1, std::memory_order_release);
            return false;
        }
        T x = load_slot(b);
        if (t == b) {
            // Last item: race the thieves for it. Seq_cst: pairs with their CAS on top.
            const bool won =
                top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst, std::memory_order_relaxed);
            bottom_.store(b + 1, std::memory_order_release);  // release: as above
            if (!won) return false;
        }
        out = x;
        return true;
    }

    /// Calls f(item) for every queued item, oldest first, while neither the owner nor any
    /// thief runs (a task dump pauses them all: runtime/worker_pause.hpp). Acquire loads: the
    /// pause's handshake already orders the last writes; these only keep the reads atomic.
    template <class F>
    void for_each_quiescent(F& f) const {
        const std::int64_t t = top_.load(std::memory_order_acquire);
        const std::int64_t b = bottom_.load(std::memory_order_acquire);
        for (std::int64_t i = t; i < b; ++i) f(load_slot(i));
    }

    /// Owner or thief: takes the oldest item (the top), like a single steal. The owner uses
    /// it for fairness: now and then the oldest local task runs instead of the newest.
    bool pop_top(T& out) noexcept {
        std::int64_t t = top_.load(std::memory_order_seq_cst);  // as in steal_into()
        const std::int64_t b = bottom_.load(std::memory_order_seq_cst);
        if (t >= b) return false;
        T x = load_slot(t);
        // Seq_cst: pairs with pop()'s and the thieves' CAS on top.
        if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst, std::memory_order_relaxed)) return false;
        out = x;
        return true;
    }

    /// Owner: takes up to `n` of the oldest items (from the top) with one CAS, for overflow.
    /// Safe because only thieves move top and they CAS it too, while the owner is not popping.
    /// Returns how many were taken (0 when a thief raced us; the caller retries its push).
    std::size_t pop_top_batch(T* out, std::size_t n) noexcept {
        std::int64_t t = top_.load(std::memory_order_acquire);           // pairs with thieves' CAS
        const std::int64_t b = bottom_.load(std::memory_order_relaxed);  // owner's own
        const auto avail = static_cast<std::size_t>(b - t);
        if (n > avail) n = avail;
        for (std::size_t i = 0; i < n; ++i) out[i] = load_slot(t + static_cast<std::int64_t>(i));
        // Seq_cst: orders against thieves' CAS on top; on failure nothing was taken.
        if (n == 0 || !top_.compare_exchange_strong(t, t + static_cast<std::int64_t>(n), std::memory_order_seq_cst,
                                                    std::memory_order_relaxed))
            return 0;
        return n;
    }

    /// Thief: steals up to half of the items, one CAS each (a batch CAS would race the owner's
    /// CAS-free pop of a non-last item). The first is returned in `first`, the rest pushed onto
    /// `dst`, the calling thread's own deque. Returns how many were stolen in total.
    std::size_t steal_into(ChaseLevDeque& dst, T& first) noexcept {
        std::size_t taken = 0;
        std::size_t want = 0;
        for (int retries = 0; retries < 8;) {
            // Seq_cst loads, top before bottom: the paper's fence; pairs with pop()'s seq_cst
            // store of bottom and load of top. Bottom's load is also the acquire that pairs
            // with push()'s release store, making the slot and the item visible.
            std::int64_t t = top_.load(std::memory_order_seq_cst);
            const std::int64_t b = bottom_.load(std::memory_order_seq_cst);
            if (t >= b) break;
            if (want == 0) {
                // Half, rounded up, and no more than dst can take (plus the one returned).
                // dst belongs to this thread, so its free room can only grow meanwhile.
                want = std::min(static_cast<std::size_t>(b - t + 1) / 2, dst.capacity() - dst.size() + 1);
            }
            T x = load_slot(t);
            // Seq_cst: pairs with the owner's CAS in pop()/pop_top_batch() and other thieves'.
            if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst, std::memory_order_relaxed)) {
                ++retries;
                continue;
            }
            if (taken == 0) {
                first = x;
            } else {
                [[maybe_unused]] const bool pushed = dst.push(x);
                assert(pushed && "want is bounded by dst's free room");
            }
            if (++taken == want) break;
        }
        return taken;
    }

    /// Any thread: the index of the oldest item, that is how many items were ever taken
    /// from the top (by pop_top, pop_top_batch, thieves, and pop()'s race for the last
    /// item). It only grows. Relaxed: a hint for the owner's choice of what runs next, which
    /// synchronizes nothing; the CAS of whoever takes an item decides who has it.
    std::int64_t top_index() const noexcept { return top_.load(std::memory_order_relaxed); }
    /// Owner: the index the next push takes. Relaxed: the owner is bottom's only writer.
    std::int64_t bottom_index() const noexcept { return bottom_.load(std::memory_order_relaxed); }

    /// Any thread: an estimate (exact on the owner thread).
    std::size_t size() const noexcept {
        // Seq_cst: used by a parking worker's last look for work; pairs with the pushes'
        // release stores through the idle state's RMW chain (see idle.hpp).
        const std::int64_t b = bottom_.load(std::memory_order_seq_cst);
        const std::int64_t t = top_.load(std::memory_order_seq_cst);
        return b > t ? static_cast<std::size_t>(b - t) : 0;
    }
    bool empty() const noexcept { return size() == 0; }

private:
    // Relaxed, word by word: see "Items of more than one word" above.
    void store_slot(std::int64_t index, const T& x) noexcept {
        std::uint64_t words[kWords] = {};
        std::memcpy(words, &x, sizeof(T));
        std::atomic<std::uint64_t>* slot = &slots_[(static_cast<std::size_t>(index) & mask_) * kWords];
        for (std::size_t i = 0; i < kWords; ++i) slot[i].store(words[i], std::memory_order_relaxed);
    }
    T load_slot(std::int64_t index) const noexcept {
        std::uint64_t words[kWords];
        const std::atomic<std::uint64_t>* slot = &slots_[(static_cast<std::size_t>(index) & mask_) * kWords];
        for (std::size_t i = 0; i < kWords; ++i) words[i] = slot[i].load(std::memory_order_relaxed);
        T x;
        std::memcpy(&x, words, sizeof(T));
        return x;
    }

    // Separate cache lines: thieves hammer top, the owner hammers bottom.
    alignas(64) std::atomic<std::int64_t> top_{0};
    alignas(64) std::atomic<std::int64_t> bottom_{0};
    alignas(64) const std::size_t mask_;
    const std::unique_ptr<std::atomic<std::uint64_t>[]> slots_;
};

}  // namespace eddy::detail
