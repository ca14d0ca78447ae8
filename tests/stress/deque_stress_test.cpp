// tests/stress/deque_stress_test.cpp: the Chase-Lev deque under repeated owner/thief races.
//
// tests/runtime/chase_lev_deque_test.cpp checks each operation's contract and runs one
// owner-versus-thieves round per capacity. Here the same property (every item pushed is taken
// exactly once: never lost, never duplicated) is checked over many rounds and in the shapes
// the scheduler really produces:
//   * the owner mixes pushes and pops in a seeded pseudo-random pattern, so the deque is
//     sometimes empty, sometimes one item long (the owner/thief race on the last item),
//     sometimes full;
//   * a full deque makes room either by pop() (the newest item) or by pop_top_batch() (the
//     oldest half, as Worker::push_local moves its overflow to the global queue), the latter
//     racing the thieves' CAS on top;
//   * the owner now and then takes its oldest item with pop_top (its fairness pop), and the
//     thieves now and then take one item with pop_top instead of steal_into;
//   * thieves steal into their own deques and, in one variant, rob each other's deques too,
//     so every deque has an owner and concurrent thieves at once.
// Capacities 2 and 4 make the full and last-item paths happen on most operations; 256 is
// the production size. Sizes are chosen to stay well under 20 s in a TSan build on 2 cores.
#include "chase_lev_deque.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <latch>
#include <memory>
#include <thread>
#include <vector>

using eddy::detail::ChaseLevDeque;

namespace {

using Deque = ChaseLevDeque<std::uintptr_t>;

struct Config {
    std::size_t capacity;
    std::size_t items;
    int thieves;
    bool thieves_rob_each_other;  // thieves also steal from the other thieves' deques
    bool overflow_by_batch;       // a full owner deque makes room with pop_top_batch
    std::uint64_t seed;
};

struct Outcome {
    std::size_t lost = 0;
    std::size_t duplicated = 0;
    std::size_t stolen = 0;      // items taken by thieves (reported, not asserted)
    std::size_t overflowed = 0;  // items moved out by pop_top_batch (reported, not asserted)
};

class Rng {
public:
    explicit Rng(std::uint64_t seed) : s_(seed | 1) {}
    std::uint64_t next() noexcept {
        s_ ^= s_ >> 12;
        s_ ^= s_ << 25;
        s_ ^= s_ >> 27;
        return s_ * 0x2545F4914F6CDD1Dull;
    }

private:
    std::uint64_t s_;
};

Outcome run_round(const Config& cfg) {
    std::vector<std::atomic<std::uint8_t>> taken(cfg.items);
    // Relaxed: only the final counts matter, and the joins order them before they are read.
    auto record = [&taken](std::uintptr_t v) { taken[v].fetch_add(1, std::memory_order_relaxed); };

    Deque owner_deque(cfg.capacity);
    std::vector<std::unique_ptr<Deque>> thief_deques;
    for (int i = 0; i < cfg.thieves; ++i) thief_deques.push_back(std::make_unique<Deque>(cfg.capacity));

    std::atomic<bool> owner_done{false};
    std::atomic<std::size_t> stolen{0};
    std::latch started(cfg.thieves + 1);
    std::vector<std::thread> threads;
    for (int me = 0; me < cfg.thieves; ++me) {
        threads.emplace_back([&, me] {
            Deque& own = *thief_deques[static_cast<std::size_t>(me)];
            // Victims: the owner's deque, then (optionally) every other thief's.
            std::vector<Deque*> victims{&owner_deque};
            if (cfg.thieves_rob_each_other)
                for (int other = 0; other < cfg.thieves; ++other)
                    if (other != me) victims.push_back(thief_deques[static_cast<std::size_t>(other)].get());
            std::size_t attempts = 0;
            started.arrive_and_wait();
            for (;;) {
                // Read before the sweep: a sweep that starts after the owner finished and finds
                // nothing anywhere means nothing is left for this thief. (Only a deque's owner
                // pushes into it, and this thief's own deque is drained below.)
                const bool done = owner_done.load(std::memory_order_acquire);
                bool stole_any = false;
                for (Deque* victim : victims) {
                    std::uintptr_t first = 0;
                    // Every fourth attempt takes a single item with pop_top, which any thread
                    // may call, instead of steal_into.
                    if (++attempts % 4 == 0) {
                        if (victim->pop_top(first)) {
                            stolen.fetch_add(1, std::memory_order_relaxed);
                            stole_any = true;
                            record(first);
                        }
                    } else if (const std::size_t n = victim->steal_into(own, first); n > 0) {
                        stolen.fetch_add(n, std::memory_order_relaxed);
                        stole_any = true;
                        record(first);
                        std::uintptr_t x = 0;
                        while (own.pop(x)) record(x);
                    }
                }
                if (!stole_any) {
                    if (done) return;
                    std::this_thread::yield();  // fewer cores than threads; not a synchronization
                }
            }
        });
    }

    Rng rng(cfg.seed);
    std::vector<std::uintptr_t> batch(cfg.capacity);
    const std::size_t batch_size = std::max<std::size_t>(1, cfg.capacity / 2);
    std::size_t overflowed = 0;
    started.arrive_and_wait();
    std::uintptr_t x = 0;
    for (std::uintptr_t v = 0; v < cfg.items; ++v) {
        while (!owner_deque.push(v)) {
            if (cfg.overflow_by_batch) {
                // Zero when a thief's CAS won the race and thieves made room; retry the push.
                const std::size_t n = owner_deque.pop_top_batch(batch.data(), batch_size);
                for (std::size_t i = 0; i < n; ++i) record(batch[i]);
                overflowed += n;
            } else if (owner_deque.pop(x)) {
                record(x);
            }
        }
        // Fewer pops in the overflow variants, so that even a 256-slot deque fills up.
        const std::uint64_t r = rng.next();
        if (r % (cfg.overflow_by_batch ? 16 : 4) == 0 && owner_deque.pop(x)) record(x);
        if (r % 11 == 0 && owner_deque.pop_top(x)) record(x);  // the owner's fairness pop
        if (r % (cfg.overflow_by_batch ? 997 : 97) == 0) {
            // Now and then drain completely: the next pushes start from an empty deque and
            // the owner's pops meet the thieves on the last item.
            while (owner_deque.pop(x)) record(x);
        }
        if (v % (2 * cfg.capacity) == 0) std::this_thread::yield();  // let thieves in; not a sync
    }
    while (owner_deque.pop(x)) record(x);
    owner_done.store(true, std::memory_order_release);
    for (auto& t : threads) t.join();

    Outcome out;
    for (auto& t : taken) {
        const std::uint8_t c = t.load(std::memory_order_relaxed);
        if (c == 0) ++out.lost;
        if (c > 1) ++out.duplicated;
    }
    out.stolen = stolen.load(std::memory_order_relaxed);
    out.overflowed = overflowed;
    for (auto& d : thief_deques) CHECK(d->empty());
    CHECK(owner_deque.empty());
    return out;
}

void run_rounds(std::size_t capacity, std::size_t items, int rounds, bool rob_each_other, bool overflow_by_batch) {
    std::size_t stolen = 0;
    std::size_t overflowed = 0;
    for (int round = 0; round < rounds; ++round) {
        CAPTURE(capacity);
        CAPTURE(round);
        const Outcome o = run_round(Config{capacity, items, 3, rob_each_other, overflow_by_batch,
                                           0x5eed0000u + static_cast<std::uint64_t>(round) * 7919u + capacity});
        CHECK(o.lost == 0);
        CHECK(o.duplicated == 0);
        stolen += o.stolen;
        overflowed += o.overflowed;
    }
    MESSAGE("capacity " << capacity << ": thieves took " << stolen << ", pop_top_batch took " << overflowed << " of "
                        << items * static_cast<std::size_t>(rounds) << " items");
}

constexpr std::size_t kItems = 40'000;
constexpr int kRounds = 10;

}  // namespace

TEST_SUITE("stress/deque_stress") {

TEST_CASE("over repeated rounds an owner racing three thieves never loses or duplicates an item") {
    for (std::size_t capacity : {std::size_t{2}, std::size_t{4}, std::size_t{256}})
        run_rounds(capacity, kItems, kRounds, false, false);
}

TEST_CASE("thieves that also rob each other's deques never lose or duplicate an item") {
    for (std::size_t capacity : {std::size_t{2}, std::size_t{4}, std::size_t{256}})
        run_rounds(capacity, kItems, kRounds, true, false);
}

TEST_CASE("overflow by pop_top_batch racing the thieves never loses or duplicates an item") {
    for (std::size_t capacity : {std::size_t{2}, std::size_t{4}, std::size_t{256}})
        run_rounds(capacity, kItems, kRounds, false, true);
}

TEST_CASE("overflow by pop_top_batch while thieves rob each other never loses or duplicates an item") {
    for (std::size_t capacity : {std::size_t{2}, std::size_t{4}, std::size_t{256}})
        run_rounds(capacity, kItems, kRounds, true, true);
}

}  // TEST_SUITE("stress/deque_stress")
