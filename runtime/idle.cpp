// runtime/idle.cpp: see idle.hpp for the rules and why each exists.
#include "idle.hpp"

#include <algorithm>
#include <stdexcept>

namespace eddy::detail {

Idle::Idle(std::size_t num_workers)
    : num_workers_(num_workers), state_(static_cast<std::uint32_t>(num_workers) << kUnparkedShift) {
    if (num_workers == 0 || num_workers > kSearchMask)
        throw std::invalid_argument("eddy: worker count must be from 1 to 65535");
    sleepers_.reserve(num_workers);
}

bool Idle::should_wake() noexcept {
    // Seq_cst RMW, not a load: see "Why the loads in rule 1..." in idle.hpp. Pairs with the
    // seq_cst RMWs in transition_to_parked() and transition_from_searching().
    const std::uint32_t s = state_.fetch_add(0, std::memory_order_seq_cst);
    return (s & kSearchMask) == 0 && (s >> kUnparkedShift) < num_workers_;
}

std::optional<std::size_t> Idle::worker_to_notify() {
    if (!should_wake()) return std::nullopt;
    std::lock_guard lock(sleepers_lock_);
    if (!should_wake() || sleepers_.empty()) return std::nullopt;  // re-check under the lock
    // Seq_cst: one more unparked and one more searching, atomically, while the list and the
    // counts agree (both under the lock).
    state_.fetch_add(kUnparkedOne | 1u, std::memory_order_seq_cst);
    const std::size_t worker = sleepers_.back();
    sleepers_.pop_back();
    return worker;
}

bool Idle::transition_to_searching() {
    const std::uint32_t s = state_.load(std::memory_order_seq_cst);
    // More than half may slip through when two workers race here; that is only a missed
    // optimization, never a correctness problem (Tokio makes the same trade).
    if (2 * std::size_t{s & kSearchMask} >= num_workers_) return false;
    state_.fetch_add(1, std::memory_order_seq_cst);  // pairs with should_wake()'s RMW
    return true;
}

bool Idle::transition_from_searching() {
    // Seq_cst: pairs with should_wake(); the caller that takes the count to zero must wake.
    const std::uint32_t prev = state_.fetch_sub(1, std::memory_order_seq_cst);
    return (prev & kSearchMask) == 1;
}

bool Idle::transition_to_parked(std::size_t worker, bool is_searching) {
    std::lock_guard lock(sleepers_lock_);
    const std::uint32_t dec = kUnparkedOne | (is_searching ? 1u : 0u);
    // Seq_cst: the parking side of the Dekker pattern; pairs with should_wake()'s RMW.
    const std::uint32_t prev = state_.fetch_sub(dec, std::memory_order_seq_cst);
    sleepers_.push_back(worker);
    return is_searching && (prev & kSearchMask) == 1;
}

bool Idle::transition_from_parked(std::size_t worker) {
    std::lock_guard lock(sleepers_lock_);
    return std::find(sleepers_.begin(), sleepers_.end(), worker) == sleepers_.end();
}

void Idle::unpark_for_shutdown(std::size_t worker) {
    std::lock_guard lock(sleepers_lock_);
    auto it = std::find(sleepers_.begin(), sleepers_.end(), worker);
    if (it == sleepers_.end()) return;
    sleepers_.erase(it);
    state_.fetch_add(kUnparkedOne, std::memory_order_seq_cst);
}

std::size_t Idle::num_searching() const noexcept { return state_.load(std::memory_order_seq_cst) & kSearchMask; }
std::size_t Idle::num_unparked() const noexcept { return state_.load(std::memory_order_seq_cst) >> kUnparkedShift; }

}  // namespace eddy::detail
