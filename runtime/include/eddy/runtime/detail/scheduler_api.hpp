// eddy/runtime/detail/scheduler_api.hpp: the runtime's entry points that eddy's templates
// (spawn, JoinHandle, when_all, yield_now) call. Not for users: no stability promise.
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>

#include <eddy/tasks/detail/frame_header.hpp>
#include <eddy/tasks/detail/promise.hpp>

namespace eddy::detail {

class Scheduler;

/// The scheduler whose worker runs the calling thread, or nullptr.
Scheduler* current_scheduler() noexcept;

/// Throws eddy::WrongThread naming `what` unless the caller runs on a worker.
Scheduler& require_worker(const char* what);

/// Starts `frame` (with promise `p`) as a root task of `sched`: registers it, routes its
/// completion to the join protocol and queues it. On failure the frame is destroyed and
/// WrongThread (sched == nullptr) or RuntimeStopped is thrown.
void spawn_root(Scheduler* sched, PromiseBase& p, std::coroutine_handle<> frame);

/// Any thread: queues the woken `frame` to be resumed by a worker of `sched` (the LIFO slot
/// of the caller's own worker when it is one of them, else the injection queue), waking a
/// worker if needed.
void schedule_on(Scheduler* sched, std::coroutine_handle<> frame) noexcept;

/// A callback that is queued and run like a task: a worker calls `run(self)` where it would
/// resume a frame. The I/O layer uses it to retry a socket operation on a worker after a
/// readiness event, and to resume the frame only once the retry settled (the frame cannot
/// be resumed to retry: await_resume cannot suspend again). Lives in an awaiter; whoever
/// queues it hands over the right to run it, as for a frame. Queued as its address with bit
/// 0 set (frames and Runnables are at least 8-aligned), so the queues stay `void*`.
struct Runnable {
    void (*run)(Runnable* self) noexcept;
};
inline void* queue_item(Runnable* r) noexcept {
    return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(r) | 1);
}
inline bool is_runnable_item(void* item) noexcept { return (reinterpret_cast<std::uintptr_t>(item) & 1) != 0; }
inline Runnable* runnable_of(void* item) noexcept {
    return reinterpret_cast<Runnable*>(reinterpret_cast<std::uintptr_t>(item) & ~std::uintptr_t{1});
}
/// Runs a queued item: a frame is resumed, a Runnable run.
inline void run_queue_item(void* item) noexcept {
    if (is_runnable_item(item)) {
        Runnable* r = runnable_of(item);
        r->run(r);
    } else {
        std::coroutine_handle<>::from_address(item).resume();
    }
}
/// Any thread: queues `r` on `sched` like schedule_on() does a frame.
void schedule_runnable_on(Scheduler* sched, Runnable* r) noexcept;

/// Worker thread only: queues the spawned `frame` on this worker's spawn deque (newest runs
/// first) without waking anyone.
void schedule_local(std::coroutine_handle<> frame) noexcept;
/// Worker thread only: queues the woken `frame` at the end of this worker's wake queue
/// (oldest runs first), not in its LIFO slot, without waking anyone.
void schedule_woken_local(std::coroutine_handle<> frame) noexcept;
/// Worker thread only: wakes an idle worker if one should help with queued work.
void notify_local_work() noexcept;
/// Worker thread only: queues `frame` behind every other runnable task of this worker.
void defer_current(std::coroutine_handle<> frame);

/// JoinHandle protocol (see frame_header.hpp for the state word).
/// Registers `joiner` to be resumed at completion; false when already complete (do not
/// suspend). Throws WrongThread off a worker. Sets `*cross` before it publishes anything:
/// true when the joiner waits for a task of another runtime (then the awaiter calls
/// join_settle once resumed, or join_withdraw if destroyed while it waits), else false.
bool join_suspend(FrameHeader* h, std::coroutine_handle<> joiner, bool* cross);
/// A joiner across runtimes, resumed: waits until the completer is done with `h`.
void join_settle(FrameHeader* h) noexcept;
/// A joiner across runtimes destroyed while it waits (its runtime's shutdown): takes the
/// registration back, or waits until the completer has handed it over.
void join_withdraw(FrameHeader* h) noexcept;
/// Blocks the calling thread until the task completes.
void join_wait(FrameHeader* h);
/// Drops the handle's reference. Unless `consumed`, a finished task's exception is reported
/// to the runtime's hook; `p` is the task's promise (used only while its frame is alive).
void join_release(FrameHeader* h, PromiseBase* p, bool consumed) noexcept;
/// Throws RuntimeStopped for a task cancelled by shutdown.
[[noreturn]] void throw_cancelled();

}  // namespace eddy::detail
