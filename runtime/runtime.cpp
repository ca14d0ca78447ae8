// runtime/runtime.cpp: Runtime, and the entry points of scheduler_api.hpp.
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/this_worker.hpp>

#include "scheduler.hpp"
#include "settings.hpp"
#include "thread_waiter.hpp"
#include "worker.hpp"
#include "worker_count.hpp"

#include <stdexcept>
#include <string>
#include <thread>

namespace eddy {

Runtime::Runtime(RuntimeConfig config) {
    detail::validate_config(config);
    const std::size_t n = detail::resolve_workers(config.workers);
    scheduler_ = std::make_unique<detail::Scheduler>(n, std::move(config));
    scheduler_->set_driver(detail::make_driver(scheduler_->driver_host()));
    scheduler_->set_runtime(this);  // a Runtime never moves (no copy, no move)
    scheduler_->start();
}

Runtime::~Runtime() = default;  // ~Scheduler shuts down

void Runtime::shutdown() { scheduler_->shutdown(); }

ShutdownReport Runtime::shutdown_gracefully(std::chrono::nanoseconds deadline, std::chrono::nanoseconds grace) {
    if (deadline.count() < 0)
        throw std::invalid_argument("eddy::Runtime::shutdown_gracefully: the deadline is negative");
    if (grace.count() < 0) throw std::invalid_argument("eddy::Runtime::shutdown_gracefully: the grace is negative");
    return scheduler_->shutdown_gracefully(deadline, grace);
}

std::size_t Runtime::workers() const noexcept { return scheduler_->num_workers(); }

RuntimeMetrics Runtime::metrics() const { return scheduler_->metrics(); }

Runtime& Runtime::current() {
    constexpr const char* kWhat = "eddy::Runtime::current";
    // A worker's runtime is alive while the worker runs: shutdown joins it first.
    if (detail::Worker* w = detail::current_worker()) return *w->scheduler().runtime();
    if (Runtime* rt = detail::BlockingPool::current_runtime(kWhat)) return *rt;
    throw WrongThread(std::string(kWhat) +
                      " called on a thread that is neither a runtime's worker nor one of its blocking threads "
                      "(spawn_blocking); pass the Runtime& to this thread instead");
}

std::optional<std::size_t> this_worker::index() noexcept {
    detail::Worker* w = detail::current_worker();
    if (w == nullptr) return std::nullopt;
    return w->index();
}

}  // namespace eddy

namespace eddy::detail {

Scheduler* current_scheduler() noexcept {
    Worker* w = current_worker();
    return w != nullptr ? &w->scheduler() : nullptr;
}

Scheduler& require_worker(const char* what) {
    Worker* w = current_worker();
    if (w == nullptr) throw WrongThread(std::string(what) + " needs to run on an eddy runtime worker thread");
    return w->scheduler();
}

void submit_blocking(Scheduler* sched, BlockingJob& job, const char* what) {
    if (sched == nullptr) throw WrongThread(std::string(what) + " needs to run on an eddy runtime worker thread");
    sched->blocking().submit(job);
}

void spawn_root(Scheduler* sched, PromiseBase& p, std::coroutine_handle<> frame) {
    if (sched == nullptr) {
        frame.destroy();
        throw WrongThread("eddy::spawn called off a runtime worker thread; use Runtime::spawn there");
    }
    sched->spawn(p, frame);
}

void schedule_on(Scheduler* sched, std::coroutine_handle<> frame) noexcept { sched->schedule(frame); }

void schedule_runnable_on(Scheduler* sched, Runnable* r) noexcept { sched->schedule_item(queue_item(r)); }

void schedule_local(std::coroutine_handle<> frame) noexcept { current_worker()->push_local(frame.address()); }

void schedule_woken_local(std::coroutine_handle<> frame) noexcept { current_worker()->push_woken(frame.address()); }

void notify_local_work() noexcept {
    Scheduler& s = current_worker()->scheduler();
    if (s.num_workers() > 1) s.notify_parked();
}

void defer_current(std::coroutine_handle<> frame) {
    Worker* w = current_worker();
    if (w == nullptr) throw WrongThread("eddy::yield_now needs to run on an eddy runtime worker thread");
    w->defer(frame.address());
}

bool join_suspend(FrameHeader* h, std::coroutine_handle<> joiner, bool* cross) {
    Scheduler& s = require_worker("co_await on an eddy::JoinHandle");
    // home_id is still the task's (the union's other members are written only here and by
    // join_wait, and a handle is awaited or waited once).
    *cross = h->home_id != s.id();
    h->joiner = joiner;
    h->joiner_sched = &s;
    // Acq_rel: release publishes joiner/joiner_sched (and *cross, read by this frame only) to
    // finish_root's acquire; acquire (when already complete) makes the result visible before
    // we resume.
    const std::uint32_t prev = h->state.fetch_or(FrameHeader::kJoinWaiting, std::memory_order_acq_rel);
    if ((prev & FrameHeader::kComplete) == 0) return true;
    *cross = false;  // complete before we registered: no completer looks at the joiner
    return false;
}

namespace {
/// Until the completer of a join across runtimes has set kJoinDone.
void wait_join_done(FrameHeader* h) noexcept {
    // Acquire: pairs with the completer's release fetch_or of kJoinDone (finish_root,
    // Scheduler::cancel); its reads of the header happen before we go on.
    while ((h->state.load(std::memory_order_acquire) & FrameHeader::kJoinDone) == 0) std::this_thread::yield();
}
}  // namespace

void join_settle(FrameHeader* h) noexcept { wait_join_done(h); }

void join_withdraw(FrameHeader* h) noexcept {
    // Acq_rel: pairs with the completer's acq_rel fetch_or of kComplete. Either we clear
    // kJoinWaiting first (it will not look at the joiner) or it saw it (then wait for it).
    const std::uint32_t prev = h->state.fetch_and(~FrameHeader::kJoinWaiting, std::memory_order_acq_rel);
    if ((prev & FrameHeader::kComplete) != 0) wait_join_done(h);
}

void join_wait(FrameHeader* h) {
    ThreadWaiter waiter;
    h->thread_waiter = &waiter;
    // Acq_rel: as in join_suspend, for thread_waiter.
    const std::uint32_t prev = h->state.fetch_or(FrameHeader::kThreadWaiting, std::memory_order_acq_rel);
    if ((prev & FrameHeader::kComplete) == 0) waiter.wait();
}

void join_release(FrameHeader* h, PromiseBase* p, bool consumed) noexcept {
    // One RMW sets kDetached and drops the handle's reference (kDetached is clear: a handle
    // is released once). Acq_rel: acquire pairs with finish_root's fetch_or, so a finished
    // result is visible before we read or destroy it; release pairs with finish_root's
    // acquire, so our reads of the frame happen before it destroys it.
    const std::uint32_t prev =
        h->state.fetch_add(FrameHeader::kDetached - FrameHeader::kRefOne, std::memory_order_acq_rel);
    if (FrameHeader::refs(prev) == 1) {  // the frame is already gone (cancelled): ours was last
        free_header(h);
        return;
    }
    // Still running: finish_root sees kDetached and frees everything. Cancelled but not yet
    // destroyed (shutdown racing this drop): shutdown destroys the frame and frees.
    if ((prev & FrameHeader::kComplete) == 0 || (prev & FrameHeader::kCancelled) != 0) return;
    const AbortState* abort = abort_state_of(h);
    if (!consumed && p->exception() && (abort == nullptr || !abort->aborted()))
        Scheduler::report_unobserved(h->home_id, p->exception());
    h->handle().destroy();  // the frame's reference is the last: frees h
}

void throw_cancelled() { throw RuntimeStopped("eddy: the task was destroyed by runtime shutdown before it finished"); }

}  // namespace eddy::detail
