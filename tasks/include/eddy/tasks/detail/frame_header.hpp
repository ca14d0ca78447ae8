// eddy/tasks/detail/frame_header.hpp: the 64-byte prefix of every Task coroutine frame.
//
// Why a prefix and not promise members: a spawned task's join state must outlive its frame.
// When the runtime shuts down it destroys every unfinished frame (so no locals leak and
// nothing of the runtime is touched later), while a JoinHandle held elsewhere still has to
// learn that its task was cancelled. So the allocation is [FrameHeader][coroutine frame], the
// header carries a reference count, and the memory is freed when the last reference goes,
// which may be after the frame itself was destroyed. This is Tokio's task cell (header +
// future + output) in coroutine form, and it costs no extra allocation per spawn.
//
// Layout assumption (checked by `header_of` in debug builds and by tests/tasks): the address
// a coroutine handle reports is the address the promise's operator new returned. GCC and
// Clang both place the frame at the start of the allocation.
//
// Only spawned root tasks and TaskGroup members use the header beyond the reference count; nested, awaited tasks
// leave it at `kRefOne` and their operator delete frees it at once. A frame whose allocation
// was elided by the compiler (HALO) has no header, which is fine: such a frame cannot escape
// its caller, so it is never spawned and never reaches operator delete.
//
// # State word (`state`)
//   bit 0 kComplete      the task reached final suspend (or was cancelled): result readable
//   bit 1 kJoinWaiting   a coroutine awaits the JoinHandle; `joiner`/`joiner_sched` are set
//   bit 2 kThreadWaiting a thread blocks in JoinHandle wait (block_on); `thread_waiter` set
//   bit 3 kDetached      the JoinHandle was dropped; whoever completes the task frees it
//   bit 4 kCancelled     shutdown destroyed the frame before it completed (implies kComplete)
//   bit 5 kFrameDead     the coroutine frame was destroyed (the header may live on)
//   bit 6 kJoinDone      a joiner of another runtime was handed over: the completer is done
//                        with the header (see "Joins across runtimes")
//   bits 7.. references  one for the live frame, one for the JoinHandle
//
// Who touches what:
//   home_id: the spawning runtime's id, written at spawn before the frame is published; lets
//     a JoinHandle dropped without being awaited (possibly after its runtime is gone) report
//     an unobserved exception to the right place.
//   joiner, joiner_sched: written by the joiner before it sets kJoinWaiting (release); read
//     by the completer after it sets kComplete and sees kJoinWaiting (acquire).
//   thread_waiter: the same, for kThreadWaiting.
//     home_id, joiner_sched and thread_waiter share storage: a handle is awaited, waited or
//     dropped unobserved, only one of the three, and the first two consume the result.
//   pool_class: written by allocate_frame, read by free_header (frame_pool.hpp).
//   prev, next, shard: the runtime's task registry, under that registry shard's lock (root
//     tasks); prev, next: a TaskGroup's list of unfinished members, under the group's lock
//     (group members, which are never root tasks).
//   extra: what a spawned task or group member carries only when asked (FrameExtra): an
//     abortable task's abort state (eddy::spawn_abortable, JoinSet), a name (spawn(task,
//     name)), or both. Written at spawn before the frame is published and never again; the
//     header owns one reference to it, dropped when the header is freed (so it outlives the
//     frame, whose cancellation scope may live in it). Null for every other frame.
//
// # Joins across runtimes
// A task of runtime B may await the JoinHandle of a task T of runtime A. The completer (A's
// finish_root, or A's shutdown cancelling T) then queues the joiner on B, and either side
// may be shutting down or destroyed meanwhile. What keeps it safe:
//   - The joiner's awaiter knows it waits across runtimes (join_suspend compares home_id
//     with its own runtime before it publishes anything) and says so in the awaiter.
//   - A completer that sees kJoinWaiting with a joiner of another runtime reads joiner and
//     joiner_sched, queues the joiner there, and only then sets kJoinDone (release): its
//     last touch of the header. B cannot be gone before that push: a joiner of B that is
//     destroyed while it waits (B's shutdown, step 4) withdraws in its awaiter's destructor
//     (join_withdraw): it clears kJoinWaiting and, if the completer had already seen it
//     (kComplete set), waits for kJoinDone. So B's shutdown waits for the push to end.
//   - The joiner, once resumed, waits for kJoinDone too (join_settle) before it takes the
//     result: taking it may destroy T's frame and free the header, which the completer
//     still touches until kJoinDone.
// A join within one runtime does none of this: the completer transfers to the joiner
// directly, and that runtime's shutdown destroys both together.
#pragma once

#include <atomic>
#include <cassert>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>

#include <eddy/tasks/detail/frame_pool.hpp>
#include <eddy/tasks/pool_config.hpp>

namespace eddy::detail {

class Scheduler;  // runtime/: opaque here
class ThreadWaiter;

/// A frame's optional extra state (see `extra` above): a reference count, how to free it, a
/// name for Runtime::dump(), and whether it is an abortable task's AbortState
/// (eddy/runtime/abort_handle.hpp, which derives from it).
struct FrameExtra {
    // Acq_rel decrements: the last owner sees every other owner's writes before freeing.
    std::atomic<std::uint32_t> refs{1};
    void (*destroy)(FrameExtra* self) noexcept = &free_plain;
    bool abortable = false;
    std::string name;  // empty: unnamed

    void retain() noexcept { refs.fetch_add(1, std::memory_order_relaxed); }  // a holder copies
    void release() noexcept {
        if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) destroy(this);
    }

private:
    static void free_plain(FrameExtra* self) noexcept { delete self; }
};

struct alignas(16) FrameHeader {
    static constexpr std::uint32_t kComplete = 1u << 0;
    static constexpr std::uint32_t kJoinWaiting = 1u << 1;
    static constexpr std::uint32_t kThreadWaiting = 1u << 2;
    static constexpr std::uint32_t kDetached = 1u << 3;
    static constexpr std::uint32_t kCancelled = 1u << 4;
    static constexpr std::uint32_t kFrameDead = 1u << 5;
    static constexpr std::uint32_t kJoinDone = 1u << 6;
    static constexpr std::uint32_t kRefOne = 1u << 7;
    static constexpr std::uint32_t kFlagMask = kRefOne - 1;
    // Always present, whatever NDEBUG says: the layout must be the same in every
    // translation unit (the library and the user's code may be built differently).
    static constexpr std::uint16_t kMagic = 0xedd7u;
    std::uint16_t magic = kMagic;
    std::uint8_t shard = 0;
    std::uint8_t pool_class = 0;  // allocate_frame: the frame pool's class, 0 for operator new

    std::atomic<std::uint32_t> state{kRefOne};
    FrameExtra* extra = nullptr;
    std::coroutine_handle<> joiner{};
    union {
        std::uint64_t home_id = 0;
        Scheduler* joiner_sched;
        ThreadWaiter* thread_waiter;
    };
    FrameHeader* prev = nullptr;
    FrameHeader* next = nullptr;

    static constexpr std::uint32_t refs(std::uint32_t s) noexcept { return s / kRefOne; }

    void* frame() noexcept { return this + 1; }
    std::coroutine_handle<> handle() noexcept { return std::coroutine_handle<>::from_address(frame()); }
};
static_assert(sizeof(FrameHeader) % alignof(std::max_align_t) == 0,
              "the frame after the header must keep operator new's alignment");
static_assert(sizeof(FrameHeader) <= 48, "keep the per-frame overhead small: every Task pays it");

inline FrameHeader* header_of(void* frame) noexcept {
    auto* h = static_cast<FrameHeader*>(frame) - 1;
#ifndef NDEBUG
    // SAFETY: see "Layout assumption" above; this catches a compiler that breaks it.
    assert(h->magic == FrameHeader::kMagic && "coroutine frame address is not the allocation");
#endif
    return h;
}

inline void* allocate_frame(std::size_t n) {
    const std::size_t bytes = sizeof(FrameHeader) + n;
#if EDDY_FRAME_POOL
    // Small frames from the calling thread's pool (frame_pool.hpp); the rest, and every frame
    // of a thread whose pool is gone, from operator new.
    if (const std::uint8_t cls = frame_pool::class_of(bytes); cls != 0) {
        if (void* raw = frame_pool::allocate(cls)) {
            FrameHeader* h = ::new (raw) FrameHeader{};
            h->pool_class = cls;
            return h + 1;
        }
    }
#endif
    return ::new (::operator new(bytes)) FrameHeader{} + 1;
}

/// Frees the allocation. The caller held the last reference.
inline void free_header(FrameHeader* h) noexcept {
    if (h->extra != nullptr) h->extra->release();
    const bool pooled = h->pool_class != 0;
    h->~FrameHeader();
    if (pooled) {
        frame_pool::deallocate(h);
    } else {
        ::operator delete(static_cast<void*>(h));
    }
}

/// The promise's operator delete: the frame is gone, its reference with it.
inline void deallocate_frame(void* frame) noexcept {
    FrameHeader* h = header_of(frame);
    // Acquire: if a JoinHandle dropped the other reference, see its writes before freeing.
    // One reference (nested task, or a detached spawned one whose handle is gone): nobody
    // else can look at the header any more, free it now.
    std::uint32_t s = h->state.load(std::memory_order_acquire);
    if (FrameHeader::refs(s) != 1) {
        // A JoinHandle still holds the header: mark the frame dead and drop our reference in
        // one RMW. Acq_rel: pairs with the handle's own RMW in join_release.
        s = h->state.fetch_add(FrameHeader::kFrameDead - FrameHeader::kRefOne, std::memory_order_acq_rel);
        if (FrameHeader::refs(s) != 1) return;
    }
    free_header(h);
}

}  // namespace eddy::detail
