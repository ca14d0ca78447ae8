// tests/stress/frame_pool_stress_test.cpp: the frame pool (eddy/tasks/detail/frame_pool.hpp)
// under a runtime: frames allocated on one worker and freed on another, of every pooled size
// and one too large for the pool, joined or detached; and frames that outlive the workers
// that allocated them (their heaps are orphaned at thread exit, then freed from the test
// thread). For 1, 2 and 8 workers, several rounds each, a fresh Runtime per round.
//
// Checks: exact sums and counts; every frame destroyed once (LifetimeCounter); the pool's
// mapped bytes come back to where they were once the runtime's threads are gone and every
// frame is freed.
#include <eddy/eddy.hpp>
#include <eddy/tasks/detail/frame_pool.hpp>

#include "support/counted.hpp"
#include "support/stress_rounds.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

using eddy::JoinHandle;
using eddy::Task;
using eddy::test::Counted;
using eddy::test::LifetimeCounter;
namespace fp = eddy::detail::frame_pool;

namespace {

#ifdef EDDY_TEST_TSAN
constexpr int kRounds = 4;
constexpr int kSpawners = 8;
constexpr int kPerSpawner = 1500;
#else
constexpr int kRounds = 10;
constexpr int kSpawners = 8;
constexpr int kPerSpawner = 6000;
#endif
constexpr std::size_t kWorkerCounts[] = {1, 2, 8};

/// A frame of about `Pad` bytes more than the bare task: spreads the tasks over the classes.
template <std::size_t Pad>
Task<std::uint64_t> leaf(std::uint64_t x, Counted, std::atomic<std::uint64_t>* sum) {
    volatile unsigned char pad[Pad];
    pad[0] = static_cast<unsigned char>(x);
    co_await eddy::yield_now();  // pad lives across a suspension (in the frame); maybe stolen
    sum->fetch_add(x, std::memory_order_relaxed);
    co_return x + pad[0] - static_cast<unsigned char>(x);
}

Task<std::uint64_t> spawner(int id, LifetimeCounter& frames, std::atomic<std::uint64_t>* sum) {
    std::vector<JoinHandle<std::uint64_t>> joined;
    std::uint64_t total = 0;
    for (int i = 0; i < kPerSpawner; ++i) {
        const auto x = static_cast<std::uint64_t>(id) * kPerSpawner + static_cast<std::uint64_t>(i);
        switch (i % 5) {
        case 0:
            (void)eddy::spawn(leaf<8>(x, Counted(frames), sum));
            break;  // detached
        case 1:
            joined.push_back(eddy::spawn(leaf<100>(x, Counted(frames), sum)));
            break;
        case 2:
            (void)eddy::spawn(leaf<300>(x, Counted(frames), sum));
            break;
        case 3:
            joined.push_back(eddy::spawn(leaf<440>(x, Counted(frames), sum)));
            break;
        default:
            joined.push_back(eddy::spawn(leaf<2000>(x, Counted(frames), sum)));
            break;  // operator new
        }
        if (joined.size() == 64) {
            for (auto& h : joined) total += co_await std::move(h);
            joined.clear();
        }
    }
    for (auto& h : joined) total += co_await std::move(h);
    co_return total;
}

Task<std::uint64_t> root(LifetimeCounter& frames, std::atomic<std::uint64_t>* sum) {
    std::vector<JoinHandle<std::uint64_t>> hs;
    for (int s = 0; s < kSpawners; ++s) hs.push_back(eddy::spawn(spawner(s, frames, sum)));
    std::uint64_t total = 0;
    for (auto& h : hs) total += co_await std::move(h);
    co_return total;
}

Task<int> held(Counted) {
    co_await eddy::yield_now();
    co_return 7;
}

Task<std::vector<JoinHandle<int>>> make_held(LifetimeCounter& frames, int n) {
    std::vector<JoinHandle<int>> hs;
    for (int i = 0; i < n; ++i) hs.push_back(eddy::spawn(held(Counted(frames))));
    co_return hs;
}

Task<int> join_even(std::vector<JoinHandle<int>>& hs) {
    int sum = 0;
    for (std::size_t i = 0; i < hs.size(); i += 2) sum += co_await std::move(hs[i]);
    co_return sum;
}

}  // namespace

TEST_CASE("frames allocated on one worker and freed on another, every class and a large one") {
    eddy::test::for_each_stress_configuration("stress_frame_pool", kWorkerCounts, kRounds, [](std::size_t workers) {
        LifetimeCounter frames;
        std::atomic<std::uint64_t> sum{0};
        std::uint64_t total = 0;
        {
            eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
            total = rt.block_on(root(frames, &sum));
            // The detached ones (i % 5 == 0 or 2) may still run: wait for the sum.
            constexpr std::uint64_t n = std::uint64_t{kSpawners} * kPerSpawner;
            while (sum.load(std::memory_order_relaxed) != n * (n - 1) / 2) std::this_thread::yield();
        }
        constexpr std::uint64_t n = std::uint64_t{kSpawners} * kPerSpawner;
        std::uint64_t joined = 0;
        for (std::uint64_t x = 0; x < n; ++x)
            if (x % kPerSpawner % 5 == 1 || x % kPerSpawner % 5 == 3 || x % kPerSpawner % 5 == 4) joined += x;
        CHECK(total == joined);
        CHECK(frames.alive() == 0);
    });
}

TEST_CASE("frames that outlive the workers that allocated them (orphaned heaps)") {
    eddy::test::for_each_stress_configuration("stress_frame_pool", kWorkerCounts, kRounds, [](std::size_t workers) {
        LifetimeCounter frames;
        const std::size_t before = fp::mapped_bytes();
        std::vector<JoinHandle<int>> hs;
        {
            eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
            hs = rt.block_on(make_held(frames, 2000));
            // Some finish, some are cancelled by shutdown; their headers stay with the handles.
            CHECK(rt.block_on(join_even(hs)) == 7 * 1000);
        }
        // The workers are gone; their heaps still own the headers the handles hold.
        for (std::size_t i = 1; i < hs.size(); i += 2) hs[i] = JoinHandle<int>();
        hs.clear();
        CHECK(frames.alive() == 0);
        // Every block the workers allocated came back: their heaps are unmapped. What this
        // thread keeps (block_on's frames) is bounded by its own heap.
        CHECK(fp::mapped_bytes() <= before + fp::kKeepEmptyPages * fp::kSegmentBytes + fp::kSegmentBytes);
    });
}
