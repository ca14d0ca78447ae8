// tests/support/counted.hpp: a lifetime counter, to prove that frames and results are
// destroyed exactly once (after cppcoro's test/counted.hpp).
//
// A `Counted` reports every construction (default, copy, move) and destruction to the
// `LifetimeCounter` it was made with. Pass one by value into a coroutine: the parameter copy
// lives in the coroutine frame, so `counter.alive() == 0` proves the frame was destroyed.
// Declare the counter before anything that may hold a Counted (a Runtime, a Task, a
// JoinHandle), so that it outlives them.
//
// The counts are atomics: frames are destroyed on worker threads while the test thread reads.
// Read them only after something ordered those threads before the read (a join, a latch,
// Runtime shutdown); the counts themselves are then exact.
#pragma once

#include <atomic>

namespace eddy::test {

struct LifetimeCounter {
    std::atomic<int> default_constructions{0};
    std::atomic<int> copy_constructions{0};
    std::atomic<int> move_constructions{0};
    std::atomic<int> destructions{0};

    int constructions() const noexcept {
        return default_constructions.load() + copy_constructions.load() + move_constructions.load();
    }
    /// Objects constructed and not yet destroyed.
    int alive() const noexcept { return constructions() - destructions.load(); }
};

class Counted {
public:
    explicit Counted(LifetimeCounter& counter, int value = 0) noexcept : counter_(&counter), value_(value) {
        counter_->default_constructions.fetch_add(1);
    }
    Counted(const Counted& other) noexcept : counter_(other.counter_), value_(other.value_) {
        counter_->copy_constructions.fetch_add(1);
    }
    Counted(Counted&& other) noexcept : counter_(other.counter_), value_(other.value_) {
        counter_->move_constructions.fetch_add(1);
    }
    // Assignment neither constructs nor destroys: the counts stay as they are. Both sides
    // must count into the same counter.
    Counted& operator=(const Counted& other) noexcept {
        value_ = other.value_;
        return *this;
    }
    Counted& operator=(Counted&& other) noexcept {
        value_ = other.value_;
        return *this;
    }
    ~Counted() { counter_->destructions.fetch_add(1); }

    int value() const noexcept { return value_; }

private:
    LifetimeCounter* counter_;
    int value_;
};

}  // namespace eddy::test
