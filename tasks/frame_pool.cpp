// tasks/frame_pool.cpp: see eddy/tasks/detail/frame_pool.hpp (layout, cross-thread frees,
// how memory is given back, sanitizers).
#include <eddy/tasks/detail/frame_pool.hpp>

#include <eddy/tasks/detail/spin_lock.hpp>

#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define EDDY_POOL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EDDY_POOL_ASAN 1
#endif
#endif
#ifdef EDDY_POOL_ASAN
#include <sanitizer/asan_interface.h>
#define EDDY_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define EDDY_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define EDDY_POISON(p, n) ((void)(p), (void)(n))
#define EDDY_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace eddy::detail::frame_pool {
namespace {

struct Block {
    Block* next;
};
struct Heap;
struct Segment;

/// One 64 KiB page's descriptor (in its segment's header). Owner thread only (or the orphan
/// lock once the heap is orphaned).
struct Page {
    Block* free = nullptr;  // freed blocks of this page
    char* bump = nullptr;   // next never-used block
    char* end = nullptr;    // end of the page's last whole block
    Segment* segment = nullptr;
    Page* prev = nullptr;  // in the heap's avail[class] list, or its released list
    Page* next = nullptr;
    std::uint32_t used = 0;  // blocks handed out and not freed
    std::uint16_t block_bytes = 0;
    std::uint8_t cls = 0;  // 0: not assigned (released or never carved)
    bool listed = false;   // in avail[cls] (it has a free or never-used block)
    bool dirty = false;    // released but not yet madvised
};

struct Segment {
    Heap* heap;
    Segment* prev;
    Segment* next;
    std::uint32_t carved;  // pages carved so far (carving is in address order)
    std::uint32_t in_use;  // carved pages not on the released list
    Page pages[kPagesPerSegment];
};
constexpr std::size_t kSegmentHeaderBytes = (sizeof(Segment) + 63) / 64 * 64;
static_assert(kSegmentHeaderBytes < kPageBytes / 2, "page 0 must keep room for blocks");
static_assert(kSegmentHeaderBytes <= 4096, "decommit keeps the first 4 KiB of page 0: the header must fit there");

Block* const kOrphaned = reinterpret_cast<Block*>(std::uintptr_t{1});

struct Heap {
    Page* avail[kClasses + 1] = {};  // per class: pages with a free or never-used block
    Page* released = nullptr;        // pages with no class, ready to be reassigned
    Segment* segments = nullptr;
    Segment* carving = nullptr;   // the segment with pages not carved yet
    std::size_t live = 0;         // blocks handed out and not freed (orphan lock, once orphaned)
    std::size_t empty_pages = 0;  // listed pages with used == 0
    std::size_t segment_count = 0;
    // Other threads push frees here (release CAS); the owner takes the whole list (acquire
    // exchange). kOrphaned once the owner exited: then frees take orphan_lock instead.
    alignas(64) std::atomic<Block*> remote{nullptr};
    SpinLock orphan_lock;
};

std::atomic<std::size_t> g_mapped{0};  // relaxed: a statistic

[[gnu::tls_model("initial-exec")]] constinit thread_local Heap* t_heap = nullptr;
[[gnu::tls_model("initial-exec")]] constinit thread_local bool t_exited = false;

Page* page_of(void* block) noexcept {
    const auto addr = reinterpret_cast<std::uintptr_t>(block);
    auto* seg = reinterpret_cast<Segment*>(addr & ~(kSegmentBytes - 1));
    return &seg->pages[(addr & (kSegmentBytes - 1)) / kPageBytes];
}

char* page_start(Page* p) noexcept {
    char* base = reinterpret_cast<char*>(p->segment);
    const std::size_t index = static_cast<std::size_t>(p - p->segment->pages);
    return index == 0 ? base + kSegmentHeaderBytes : base + index * kPageBytes;
}

// ---- lists ----------------------------------------------------------------------------------

void link(Page*& head, Page* p) noexcept {
    p->prev = nullptr;
    p->next = head;
    if (head != nullptr) head->prev = p;
    head = p;
}
void unlink(Page*& head, Page* p) noexcept {
    if (p->prev != nullptr) {
        p->prev->next = p->next;
    } else {
        head = p->next;
    }
    if (p->next != nullptr) p->next->prev = p->prev;
    p->prev = p->next = nullptr;
}

// ---- segments -------------------------------------------------------------------------------

Segment* map_segment(Heap* h) {
    // Twice the size, then trim to a 2 MiB-aligned 2 MiB: the alignment is what lets a block
    // find its page, and what lets the kernel back the segment with one huge page.
    void* raw = ::mmap(nullptr, 2 * kSegmentBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    const auto start = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t aligned = (start + kSegmentBytes - 1) & ~(kSegmentBytes - 1);
    if (aligned > start) ::munmap(raw, aligned - start);
    const std::uintptr_t tail = aligned + kSegmentBytes;
    if (start + 2 * kSegmentBytes > tail) ::munmap(reinterpret_cast<void*>(tail), start + 2 * kSegmentBytes - tail);
#ifdef MADV_HUGEPAGE
    (void)::madvise(reinterpret_cast<void*>(aligned), kSegmentBytes, MADV_HUGEPAGE);  // a hint
#endif
    auto* seg = ::new (reinterpret_cast<void*>(aligned)) Segment{h, nullptr, nullptr, 0, 0, {}};
    for (Page& p : seg->pages) p.segment = seg;
    seg->next = h->segments;
    if (h->segments != nullptr) h->segments->prev = seg;
    h->segments = seg;
    ++h->segment_count;
    g_mapped.fetch_add(kSegmentBytes, std::memory_order_relaxed);
    return seg;
}

void unmap_segment(Heap* h, Segment* seg) noexcept {
    for (std::uint32_t i = 0; i < seg->carved; ++i) unlink(h->released, &seg->pages[i]);  // all released
    if (seg->prev != nullptr) {
        seg->prev->next = seg->next;
    } else {
        h->segments = seg->next;
    }
    if (seg->next != nullptr) seg->next->prev = seg->prev;
    if (h->carving == seg) h->carving = nullptr;
    --h->segment_count;
    EDDY_UNPOISON(seg, kSegmentBytes);  // the range may be mapped again for anything else
    ::munmap(seg, kSegmentBytes);
    g_mapped.fetch_sub(kSegmentBytes, std::memory_order_relaxed);
}

// ---- pages ----------------------------------------------------------------------------------

/// A page for class `cls`, listed in avail[cls] (a released page, or a new one).
Page* new_page(Heap* h, std::uint8_t cls) {
    Page* p = h->released;
    if (p != nullptr) {
        unlink(h->released, p);
        ++p->segment->in_use;
        if (p->dirty) p->dirty = false;  // not madvised yet: its memory is still there, fine
    } else {
        Segment* seg = h->carving;
        if (seg == nullptr || seg->carved == kPagesPerSegment) seg = h->carving = map_segment(h);
        p = &seg->pages[seg->carved++];
        ++seg->in_use;
    }
    const std::size_t bytes = class_bytes(cls);
    char* start = page_start(p);
    char* limit =
        reinterpret_cast<char*>(p->segment) + (static_cast<std::size_t>(p - p->segment->pages) + 1) * kPageBytes;
    p->free = nullptr;
    p->bump = start;
    p->end = start + (static_cast<std::size_t>(limit - start) / bytes) * bytes;
    p->used = 0;
    p->block_bytes = static_cast<std::uint16_t>(bytes);
    p->cls = cls;
    EDDY_POISON(start, static_cast<std::size_t>(limit - start));  // nothing handed out yet
    link(h->avail[cls], p);
    p->listed = true;
    ++h->empty_pages;
    return p;
}

/// Frees `b` into its page; the caller owns the heap (its thread, or the orphan lock).
void free_local(Heap* h, Page* p, Block* b) noexcept {
    EDDY_UNPOISON(b, sizeof(Block));
    b->next = p->free;
    p->free = b;
    EDDY_POISON(b, p->block_bytes);
    --h->live;
    if (!p->listed) {
        link(h->avail[p->cls], p);
        p->listed = true;
    }
    if (--p->used == 0) ++h->empty_pages;
}

/// Takes the blocks other threads freed (the owner, or the orphan lock holder with `seal`).
void drain_remote(Heap* h, Block* list) noexcept {
    while (list != nullptr) {
        EDDY_UNPOISON(list, sizeof(Block));
        Block* next = list->next;
        free_local(h, page_of(list), list);
        list = next;
    }
}

void* take(Heap* h, Page* p) noexcept {
    Block* b = p->free;
    if (b != nullptr) {
        EDDY_UNPOISON(b, sizeof(Block));
        p->free = b->next;
    } else {
        b = reinterpret_cast<Block*>(p->bump);
        p->bump += p->block_bytes;
    }
    EDDY_UNPOISON(b, p->block_bytes);
    if (p->used++ == 0) --h->empty_pages;
    ++h->live;
    return b;
}

bool has_room(const Page* p) noexcept { return p->free != nullptr || p->bump != p->end; }

/// Gives a released page's memory back (its segment stays mapped).
void decommit(Page* p) noexcept {
    p->dirty = false;
    const std::size_t index = static_cast<std::size_t>(p - p->segment->pages);
    // Page 0 keeps the 4 KiB that hold the segment's header.
    char* from = reinterpret_cast<char*>(p->segment) + index * kPageBytes + (index == 0 ? 4096 : 0);
    char* to = reinterpret_cast<char*>(p->segment) + (index + 1) * kPageBytes;
    (void)::madvise(from, static_cast<std::size_t>(to - from), MADV_DONTNEED);
}

/// An empty listed page leaves its class for the released list (memory still resident:
/// `dirty`); its segment is unmapped when that was its last page in use.
void release_page(Heap* h, Page* p) noexcept {
    unlink(h->avail[p->cls], p);
    p->listed = false;
    p->cls = 0;
    p->dirty = true;
    --h->empty_pages;
    link(h->released, p);
    if (--p->segment->in_use == 0) unmap_segment(h, p->segment);
}

/// Releases empty pages beyond `keep`; unmaps segments left with no page in use; decommits
/// the released pages of the others.
void release_empty(Heap* h, std::size_t keep) noexcept {
    for (std::size_t cls = 1; cls <= kClasses && h->empty_pages > keep; ++cls) {
        for (Page* p = h->avail[cls]; p != nullptr && h->empty_pages > keep;) {
            Page* next = p->next;
            if (p->used == 0) release_page(h, p);
            p = next;
        }
    }
    for (Page* p = h->released; p != nullptr; p = p->next)
        if (p->dirty) decommit(p);
}

void destroy_heap(Heap* h) noexcept {
    while (h->segments != nullptr) unmap_segment(h, h->segments);
    delete h;
}

/// Thread exit: see "Giving memory back" in the header.
void exit_heap(Heap* h) noexcept {
    t_heap = nullptr;
    t_exited = true;
    h->orphan_lock.lock();
    // Acq_rel: acquire pairs with the pushers' release CAS (their writes to the blocks);
    // from now on every pusher sees kOrphaned and takes orphan_lock instead.
    drain_remote(h, h->remote.exchange(kOrphaned, std::memory_order_acq_rel));
    release_empty(h, 0);
    const bool last = h->live == 0;
    h->orphan_lock.unlock();
    if (last) destroy_heap(h);  // no block is out: nobody can reach h any more
}

struct ExitGuard {
    Heap* heap = nullptr;
    ~ExitGuard() {
        if (heap != nullptr) exit_heap(heap);
    }
};

Heap* make_heap() {
    if (t_exited) return nullptr;
    auto* h = new Heap;
    // Registered on first use (__cxa_thread_atexit): destroyed at this thread's exit.
    static thread_local ExitGuard guard;
    guard.heap = h;
    t_heap = h;
    return h;
}

[[gnu::noinline]] void* allocate_slow(std::uint8_t cls) {
    Heap* h = t_heap;
    if (h == nullptr && (h = make_heap()) == nullptr) return nullptr;
    for (;;) {
        // Pages with no room left leave the list (a free puts them back).
        Page* p = h->avail[cls];
        while (p != nullptr && !has_room(p)) {
            unlink(h->avail[cls], p);
            p->listed = false;
            p = h->avail[cls];
        }
        if (p != nullptr) return take(h, p);
        if (h->remote.load(std::memory_order_relaxed) == nullptr) break;
        // Acquire: pairs with the pushers' release CAS.
        drain_remote(h, h->remote.exchange(nullptr, std::memory_order_acquire));
    }
    return take(h, new_page(h, cls));
}

void free_orphaned(Heap* h, Block* b) noexcept {
    h->orphan_lock.lock();
    Page* p = page_of(b);
    free_local(h, p, b);
    if (p->used == 0) {
        // An orphaned heap keeps nothing: the page goes, and its segment with its last page.
        Segment* seg = p->segment;
        const bool segment_stays = seg->in_use > 1;
        release_page(h, p);
        if (segment_stays) decommit(p);
    }
    const bool last = h->live == 0;
    h->orphan_lock.unlock();
    // Last block: nobody else holds one, so nobody else can be waiting for the lock.
    if (last) destroy_heap(h);
}

}  // namespace

void* allocate(std::uint8_t cls) {
    if (Heap* h = t_heap) {
        if (Page* p = h->avail[cls]; p != nullptr && has_room(p)) return take(h, p);
    }
    return allocate_slow(cls);
}

void deallocate(void* block) noexcept {
    Page* p = page_of(block);
    Heap* owner = p->segment->heap;
    auto* b = static_cast<Block*>(block);
    if (owner == t_heap) {
        free_local(owner, p, b);
        return;
    }
    const std::size_t bytes = p->block_bytes;  // read before the push: then the block is the owner's
    Block* head = owner->remote.load(std::memory_order_relaxed);
    for (;;) {
        if (head == kOrphaned) {
            free_orphaned(owner, b);
            return;
        }
        EDDY_UNPOISON(b, sizeof(Block));
        b->next = head;
        EDDY_POISON(b, bytes);
        // Release: pairs with the owner's acquire exchange; the frame's last writes and the
        // link happen before the owner reuses the block. Relaxed on failure: just retry.
        if (owner->remote.compare_exchange_weak(head, b, std::memory_order_release, std::memory_order_relaxed)) return;
    }
}

void trim() noexcept {
    Heap* h = t_heap;
    if (h == nullptr) return;
    if (h->remote.load(std::memory_order_relaxed) != nullptr)
        drain_remote(h, h->remote.exchange(nullptr, std::memory_order_acquire));  // as in allocate_slow
    if (h->empty_pages > kKeepEmptyPages) release_empty(h, kKeepEmptyPages);
}

ThreadStats thread_stats() noexcept {
    ThreadStats s;
    if (Heap* h = t_heap) {
        s.has_heap = true;
        s.live_blocks = h->live;
        s.empty_pages = h->empty_pages;
        s.segments = h->segment_count;
    }
    return s;
}

std::size_t mapped_bytes() noexcept { return g_mapped.load(std::memory_order_relaxed); }

}  // namespace eddy::detail::frame_pool
