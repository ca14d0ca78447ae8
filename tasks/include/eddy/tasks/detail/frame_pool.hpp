// eddy/tasks/detail/frame_pool.hpp: per-thread size-class pools for small coroutine frames.
//
// Why: spawn_many at one worker keeps a million frames alive at once, then frees them. With
// glibc every worker thread allocates from a non-main arena, which grows one 4 KiB page at a
// time (grow_heap: an mprotect and a VMA split/merge per page) and pays malloc's per-chunk
// bookkeeping; over half of that benchmark's time was in the kernel. This pool maps 2 MiB
// segments (MADV_HUGEPAGE), carves them into 64 KiB pages of one size class each, and hands
// out blocks from a per-thread free list: no lock and no atomic on the owner's paths.
//
// Switch: the meson option `frame_pool` (<eddy/tasks/pool_config.hpp>, EDDY_FRAME_POOL).
// Off, every frame comes from ::operator new as before. The implementation lives in
// tasks/frame_pool.cpp (the one link-time reference from tasks/ upwards; eddy is always
// linked as a whole).
//
// # Shape
//   * Frames of up to kMaxPooledBytes (header included) are pooled, in 16-byte classes; larger
//     ones go to ::operator new, and so does every frame of a thread whose pool was already
//     torn down (thread exit; see below). FrameHeader::pool_class says which (0: operator new).
//   * Segment (2 MiB, 2 MiB-aligned): its first bytes hold the segment's and its 32 pages'
//     descriptors, so a block finds its page by masking its address; no per-block header.
//   * Page (64 KiB, one class): a free list, a bump pointer over never-used blocks (memory is
//     touched only when first handed out), and a count of blocks in use.
//   * Heap (one per thread that allocates a frame): per class, the pages that have a free
//     block. Only the owner thread touches it, except `remote`.
//
// # Cross-thread frees
// A block freed on another thread goes back to its owner: it is pushed on the owner heap's
// `remote` list (a Treiber stack: CAS with release, pairs with the owner's acquire exchange
// that takes the whole list, so there is no pop of one node and no ABA). The owner drains it
// when a class runs out of pages and in trim(). So memory flows back to whoever allocates,
// and a producer/consumer pair (spawn on one worker, run on another) stays bounded.
//
// # Giving memory back (the bound)
//   * A page whose blocks are all free stays with its class (reused at once by a new burst)
//     until trim() runs; trim() keeps kKeepEmptyPages of them (1 MiB) per thread, releases
//     the rest (madvise MADV_DONTNEED), and unmaps every segment with no page in use.
//   * Workers call trim() before they park: a service that bursts to a million tasks holds
//     their frames only until its workers next go idle. Threads that never park (the thread
//     calling block_on) trim only at exit.
//   * Thread exit: the heap drains its remote list, releases its empty pages, unmaps its free
//     segments; if blocks are still out (frames alive on other threads), it is orphaned: the
//     remote list is sealed (kOrphaned), later frees take the heap's lock and free locally,
//     and the last of them unmaps the rest and deletes the heap.
//   * What is never given back: per thread, up to kKeepEmptyPages empty pages, and pages
//     that still have one block in use (fragmentation: a 64 KiB page per long-lived frame,
//     at worst).
//
// # Sanitizers
// ASan: free blocks are poisoned (ASAN_POISON_MEMORY_REGION), so a use after free of a
// pooled frame is reported as use-after-poison; the first word of a free block (its link) is
// unpoisoned only while the pool itself reads or writes it. LSan does not scan the pool's
// mappings: a leaked frame is not reported itself, but the heap objects it holds are.
// TSan: the owner's structures are single-threaded; hand-offs go through `remote` (release/
// acquire) or the orphan lock.
#pragma once

#include <cstddef>
#include <cstdint>

namespace eddy::detail::frame_pool {

inline constexpr std::size_t kGranule = 16;  // operator new's alignment: the frame follows the header
inline constexpr std::size_t kMaxPooledBytes = 512;
inline constexpr std::size_t kClasses = kMaxPooledBytes / kGranule;  // 16, 32, ..., 512 bytes
inline constexpr std::size_t kSegmentBytes = std::size_t{2} << 20;
inline constexpr std::size_t kPageBytes = std::size_t{64} << 10;
inline constexpr std::size_t kPagesPerSegment = kSegmentBytes / kPageBytes;
/// Empty pages a thread keeps across trim() (so that the next burst does not fault them in).
inline constexpr std::size_t kKeepEmptyPages = 16;

/// The class of an allocation of `bytes` (1-based; 0: too large for the pool).
constexpr std::uint8_t class_of(std::size_t bytes) noexcept {
    return bytes <= kMaxPooledBytes ? static_cast<std::uint8_t>((bytes + kGranule - 1) / kGranule) : 0;
}
constexpr std::size_t class_bytes(std::uint8_t cls) noexcept { return cls * kGranule; }

/// A block of class `cls` (1 .. kClasses) from the calling thread's heap, or nullptr when this
/// thread's pool is gone (the thread is exiting): then use ::operator new. Throws
/// std::bad_alloc when no segment can be mapped.
void* allocate(std::uint8_t cls);
/// Frees a block that allocate() returned, from any thread.
void deallocate(void* block) noexcept;
/// The calling thread: takes back its blocks freed by other threads, releases its empty pages
/// beyond kKeepEmptyPages and unmaps its segments with no page in use. Cheap when there is
/// nothing to do (the workers call it before each park).
void trim() noexcept;

/// Figures for tests and benchmarks.
struct ThreadStats {
    std::size_t live_blocks = 0;  // this thread's blocks in use (anywhere)
    std::size_t empty_pages = 0;  // pages with no block in use, kept for reuse
    std::size_t segments = 0;     // segments mapped by this thread's heap
    bool has_heap = false;
};
ThreadStats thread_stats() noexcept;
/// Bytes of segments mapped by every heap, orphaned ones included (relaxed: a snapshot).
std::size_t mapped_bytes() noexcept;

}  // namespace eddy::detail::frame_pool
