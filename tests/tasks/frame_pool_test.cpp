// tests/tasks/frame_pool_test.cpp: the frame pool (eddy/tasks/detail/frame_pool.hpp) alone,
// and how Task frames use it: reuse, frees from another thread, thread exit (with and without
// blocks still out), trim, and frames too large for the pool.
#include <eddy/tasks/detail/frame_header.hpp>
#include <eddy/tasks/detail/frame_pool.hpp>
#include <eddy/tasks/pool_config.hpp>
#include <eddy/tasks/task.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

namespace fp = eddy::detail::frame_pool;

namespace {

constexpr std::uint8_t kClass = fp::class_of(128);

std::vector<void*> allocate_n(std::size_t n, std::uint8_t cls = kClass) {
    std::vector<void*> v;
    for (std::size_t i = 0; i < n; ++i) {
        void* p = fp::allocate(cls);
        REQUIRE(p != nullptr);
        std::memset(p, 0xab, fp::class_bytes(cls));  // the whole block is ours (ASan checks)
        v.push_back(p);
    }
    return v;
}

eddy::Task<int> small_task(int x) { co_return x + 1; }

// Parameters are always copied into the frame: this one is larger than any pooled class.
eddy::Task<int> large_task(std::array<char, 2 * fp::kMaxPooledBytes> big) {
    co_await std::suspend_always{};
    asm volatile("" : : "r"(big.data()) : "memory");  // the whole array is used: no shrinking it
    co_return big[0] + 1;
}

// Not inlined: the Task leaves the function that made it, so no compiler can elide its frame's
// allocation (HALO: such a frame would have no header to look at).
[[gnu::noinline]] eddy::Task<int> make_small(int x) { return small_task(x); }
[[gnu::noinline]] eddy::Task<int> make_large(int x) {
    std::array<char, 2 * fp::kMaxPooledBytes> big{};
    big[0] = static_cast<char>(x);
    return large_task(big);
}

}  // namespace

TEST_CASE("classes: 16-byte steps up to kMaxPooledBytes, 0 above") {
    CHECK(fp::class_of(1) == 1);
    CHECK(fp::class_of(16) == 1);
    CHECK(fp::class_of(17) == 2);
    CHECK(fp::class_bytes(fp::class_of(120)) == 128);
    CHECK(fp::class_of(fp::kMaxPooledBytes) == fp::kClasses);
    CHECK(fp::class_of(fp::kMaxPooledBytes + 1) == 0);
}

TEST_CASE("a freed block is reused by the next allocation of its class, on the same thread") {
    void* a = fp::allocate(kClass);
    const std::size_t live = fp::thread_stats().live_blocks;
    CHECK(live >= 1);
    fp::deallocate(a);
    CHECK(fp::thread_stats().live_blocks == live - 1);
    void* b = fp::allocate(kClass);
    CHECK(b == a);
    // Blocks are distinct, aligned for any frame, and a class's blocks do not overlap.
    auto v = allocate_n(1000);
    std::set<void*> distinct(v.begin(), v.end());
    CHECK(distinct.size() == v.size());
    for (void* p : v) CHECK(reinterpret_cast<std::uintptr_t>(p) % alignof(std::max_align_t) == 0);
    std::sort(v.begin(), v.end());
    for (std::size_t i = 1; i < v.size(); ++i)
        CHECK(static_cast<char*>(v[i]) - static_cast<char*>(v[i - 1]) >= static_cast<std::ptrdiff_t>(128));
    for (void* p : v) fp::deallocate(p);
    fp::deallocate(b);
}

TEST_CASE("blocks freed on another thread go back to their owner, which reuses them") {
    std::thread owner([] {  // a fresh heap: no other free block of the class around
        auto v = allocate_n(5000);
        const std::size_t mapped = fp::mapped_bytes();
        std::thread other([&] {
            for (void* p : v) fp::deallocate(p);
            CHECK_FALSE(fp::thread_stats().has_heap);  // freeing never makes a heap
        });
        other.join();
        // Not yet taken back (the owner drains when it runs out of room, or in trim()).
        CHECK(fp::thread_stats().live_blocks == v.size());
        // A new burst of the same size is served from the returned blocks (after the rest of
        // the last page): nothing new is mapped.
        auto w = allocate_n(5000);
        CHECK(fp::mapped_bytes() == mapped);
        std::set<void*> old(v.begin(), v.end());
        std::size_t reused = 0;
        for (void* p : w) reused += old.count(p);
        CHECK(reused >= w.size() - fp::kPageBytes / 128);
        for (void* p : w) fp::deallocate(p);
        CHECK(fp::thread_stats().live_blocks == 0);
    });
    owner.join();
}

TEST_CASE("trim gives back empty pages beyond what a thread keeps, and unmaps free segments") {
    const std::size_t before = fp::mapped_bytes();
    std::size_t after_trim = 0;
    std::thread t([&] {
        // 16 MiB of 256-byte blocks: eight segments.
        auto v = allocate_n((std::size_t{16} << 20) / 256, fp::class_of(256));
        CHECK(fp::thread_stats().segments >= 8);
        CHECK(fp::mapped_bytes() >= before + (std::size_t{16} << 20));
        for (void* p : v) fp::deallocate(p);
        CHECK(fp::thread_stats().live_blocks == 0);
        fp::trim();
        const fp::ThreadStats s = fp::thread_stats();
        CHECK(s.empty_pages == fp::kKeepEmptyPages);
        // A segment stays mapped while it holds a kept page.
        CHECK(s.segments <= fp::kKeepEmptyPages);
        after_trim = fp::mapped_bytes();
    });
    t.join();
    CHECK(after_trim <= before + fp::kKeepEmptyPages * fp::kSegmentBytes);
    CHECK(fp::mapped_bytes() == before);  // thread exit: the rest went too
}

TEST_CASE("thread exit with no block out unmaps the thread's segments") {
    const std::size_t before = fp::mapped_bytes();
    std::thread t([] {
        auto v = allocate_n(3000);
        CHECK(fp::mapped_bytes() > 0);
        for (void* p : v) fp::deallocate(p);
    });
    t.join();
    CHECK(fp::mapped_bytes() == before);
}

TEST_CASE("thread exit with blocks out: the last free elsewhere unmaps the orphaned heap") {
    const std::size_t before = fp::mapped_bytes();
    std::vector<void*> v;
    std::thread t([&] { v = allocate_n(20000); });  // about 2.5 MiB: two segments
    t.join();
    CHECK(fp::mapped_bytes() >= before + 2 * fp::kSegmentBytes);
    // Freed from two threads at once: the orphan path takes the heap's lock.
    const std::size_t half = v.size() / 2;
    std::thread a([&] {
        for (std::size_t i = 0; i < half; ++i) fp::deallocate(v[i]);
    });
    for (std::size_t i = half; i < v.size() - 1; ++i) fp::deallocate(v[i]);
    a.join();
    CHECK(fp::mapped_bytes() >= before + fp::kSegmentBytes);  // one block still out
    fp::deallocate(v.back());
    CHECK(fp::mapped_bytes() == before);
}

TEST_CASE("a thread's frees of blocks of an exited thread, mixed with its own") {
    std::vector<void*> theirs;
    std::thread t([&] { theirs = allocate_n(100); });
    t.join();
    auto mine = allocate_n(100);
    for (std::size_t i = 0; i < 100; ++i) {
        fp::deallocate(theirs[i]);
        fp::deallocate(mine[i]);
    }
}

TEST_CASE("task frames: small ones from the pool, large ones from operator new") {
    auto small = make_small(1);
    auto large = make_large(1);
    auto* hs = eddy::detail::header_of(eddy::detail::TaskAccess::get(small).address());
    auto* hl = eddy::detail::header_of(eddy::detail::TaskAccess::get(large).address());
    CHECK(hl->pool_class == 0);
#if EDDY_FRAME_POOL
    CHECK(hs->pool_class != 0);
    CHECK(fp::class_bytes(hs->pool_class) <= fp::kMaxPooledBytes);
#else
    CHECK(hs->pool_class == 0);
#endif
    // Both free correctly (destroyed without running, and after running).
    auto h = eddy::detail::TaskAccess::release(large);
    h.resume();  // to the suspend_always
    h.destroy();
}
