// eddy/sync/detail/returned_values.hpp: the values a channel handed to receivers that never
// took them, back in the channel in front of the rest. Not for users: no stability promise.
//
// A channel hands a value to a waiting receiver under its lock. If that receiver's frame is
// then destroyed before it resumes (its runtime shut down, possibly another runtime than the
// sender's), the value comes back here (wait_queue.hpp, step 6). Every value leaving the
// channel gets the next number of a count kept by the channel, so the values that come back
// are put in the order they first left; all of them are older than anything still buffered,
// which has not left yet. Rare by nature: a small sorted vector, guarded by the channel's lock.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include <eddy/runtime/detail/wait_queue.hpp>
#include <eddy/tasks/detail/spin_lock.hpp>

namespace eddy::detail {

template <class T>
class ReturnedValues {
public:
    bool empty() const noexcept { return entries_.empty(); }
    std::size_t size() const noexcept { return entries_.size(); }

    /// Puts `value`, which left the channel as number `seq`, among the others by that number.
    /// Throws std::bad_alloc (the value then stays with the caller).
    void insert(std::uint64_t seq, T& value) {
        auto at = std::upper_bound(entries_.begin(), entries_.end(), seq,
                                   [](std::uint64_t s, const Entry& e) { return s < e.seq; });
        entries_.insert(at, Entry{seq, std::move(value)});
    }

    /// A receiver's frame was destroyed holding `value`, number `seq` (its awaiter's
    /// destructor). Takes `lock`; hands the value to the first `Receiver` waiting in
    /// `receivers` (it waits, so nothing else is available: this value is the oldest), else
    /// keeps it here. Out of memory, the value stays with the caller, destroyed with its frame.
    /// `Receiver` has `item_` (an optional<T>) and `seq_`, and befriends this class.
    template <class Receiver>
    void give_back(SpinLock& lock, WaitQueue& receivers, T& value, std::uint64_t seq) noexcept {
        WakeList wakes;
        {
            std::lock_guard guard(lock);
            if (auto* r = static_cast<Receiver*>(receivers.front())) {
                r->item_.emplace(std::move(value));
                r->seq_ = seq;
                receivers.grant_front(wakes);
            } else {
                try {
                    insert(seq, value);
                } catch (const std::bad_alloc&) {
                }
            }
        }
        wakes.wake_all();
    }

    /// Not empty: the oldest value, and its number in `seq`.
    T pop_front(std::uint64_t& seq) noexcept {
        seq = entries_.front().seq;
        T v = std::move(entries_.front().value);
        entries_.erase(entries_.begin());
        return v;
    }

private:
    struct Entry {
        std::uint64_t seq;
        T value;
    };
    std::vector<Entry> entries_;  // ascending by seq
};

}  // namespace eddy::detail
