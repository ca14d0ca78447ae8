// runtime/scheduler.cpp: see scheduler.hpp (shutdown protocol) and frame_header.hpp (the
// join protocol that finish_root implements).
#include "runtime/scheduler.hpp"

#include "runtime/thread_waiter.hpp"

#include <pthread.h>

#include <cstdio>
#include <string>
#include <system_error>
#include <unordered_map>

#include <eddy/tasks/errors.hpp>

namespace eddy::detail {
namespace {

// Live schedulers by id, for JoinHandles dropped after their runtime may be gone. Touched
// only at runtime start and end and on that rare reporting path.
std::mutex g_live_mutex;
std::unordered_map<std::uint64_t, Scheduler*> g_live;  // guarded by g_live_mutex
std::atomic<std::uint64_t> g_next_id{1};

void default_report(const std::exception_ptr& e) noexcept {
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& ex) {
        std::fprintf(stderr, "eddy: exception escaped a detached task: %s\n", ex.what());
    } catch (...) {
        std::fprintf(stderr, "eddy: exception escaped a detached task (not a std::exception)\n");
    }
}

} // namespace

Scheduler::Scheduler(std::size_t workers, RuntimeConfig config)
    : config_(std::move(config)), id_(g_next_id.fetch_add(1, std::memory_order_relaxed)), idle_(workers) {
    workers_.reserve(workers);
    for (std::size_t i = 0; i < workers; ++i) workers_.push_back(std::make_unique<Worker>(*this, i));
    std::lock_guard lock(g_live_mutex);
    g_live.emplace(id_, this);
}

Scheduler::~Scheduler() {
    try {
        shutdown();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "eddy: %s (the Runtime was destroyed on its own worker)\n", e.what());
        std::terminate();
    }
    std::lock_guard lock(g_live_mutex);
    g_live.erase(id_);
}

void Scheduler::start() {
    threads_.reserve(workers_.size());
    if (driver_) driver_->start();
    try {
        for (auto& w : workers_) {
            threads_.emplace_back([worker = w.get()] { worker->run(); });
            const std::string name = "eddy-worker-" + std::to_string(w->index());
            pthread_setname_np(threads_.back().native_handle(), name.substr(0, 15).c_str());
        }
    } catch (...) {
        shutdown();  // joins the threads that did start
        throw;
    }
}

void Scheduler::shutdown() {
    if (Worker* w = current_worker(); w != nullptr && &w->scheduler() == this)
        throw WrongThread("eddy::Runtime::shutdown called from one of its own workers");
    std::lock_guard lock(shutdown_mutex_);
    if (shut_down_) return;
    shut_down_ = true;

    // Step 1. Acq_rel: pairs with spawn()'s acquire fetch_add, so a spawn either sees
    // kClosed or is counted before we wait.
    external_.fetch_or(kClosed, std::memory_order_acq_rel);
    // Acquire: pairs with spawn()'s release fetch_sub after its push.
    while ((external_.load(std::memory_order_acquire) & ~kClosed) != 0) std::this_thread::yield();

    // Step 2.
    stopping_.store(true, std::memory_order_relaxed);
    for (auto& w : workers_) w->parker().unpark();
    for (auto& t : threads_)
        if (t.joinable()) t.join();
    if (driver_) driver_->shutdown();

    // Step 3.
    for (auto& w : workers_) w->clear_queues();
    void* drained[64];
    while (inject_.pop_bulk(drained, 64) > 0) {
    }

    // Step 4. Loop: destroying a frame never registers a task (spawns are refused now), but
    // a second pass costs nothing and keeps the invariant obvious.
    for (auto all = registry_.take_all(); !all.empty(); all = registry_.take_all())
        for (FrameHeader* h : all) cancel(h);
}

void Scheduler::cancel(FrameHeader* h) noexcept {
    // Acq_rel: pairs with the JoinHandle's RMWs (join_suspend, join_wait, join_release), so
    // a thread waiter registered before is seen, and the handle sees kCancelled afterwards.
    const std::uint32_t prev =
        h->state.fetch_or(FrameHeader::kComplete | FrameHeader::kCancelled, std::memory_order_acq_rel);
    ThreadWaiter* waiter = (prev & FrameHeader::kThreadWaiting) != 0 ? h->thread_waiter : nullptr;
    h->handle().destroy();  // drops the frame's reference; frees h if the handle is gone
    // SAFETY: a thread waiter holds the handle's reference, so h outlives this signal.
    if (waiter != nullptr) waiter->signal();
}

void Scheduler::spawn(PromiseBase& p, std::coroutine_handle<> frame) {
    FrameHeader* h = header_of(frame.address());
    Worker* w = current_worker();
    const bool local = w != nullptr && &w->scheduler() == this;
    if (local && stopping()) {
        // Best effort: a spawn racing the start of shutdown may still be accepted; its task
        // is then destroyed with the other unfinished tasks (step 4), never leaked.
        frame.destroy();
        throw RuntimeStopped("eddy: spawn on a runtime that is shutting down");
    }
    if (!local) {
        // Acquire: pairs with shutdown()'s acq_rel fetch_or (step 1).
        if ((external_.fetch_add(1, std::memory_order_acquire) & kClosed) != 0) {
            external_.fetch_sub(1, std::memory_order_release);
            frame.destroy();
            throw RuntimeStopped("eddy: spawn on a runtime that is shut down");
        }
    }
    // Relaxed: the frame is not shared yet; the push below publishes these writes.
    h->state.store(2 * FrameHeader::kRefOne, std::memory_order_relaxed);  // frame + handle
    h->home_id = id_;
    p.set_finish(&finish_root, this);
    if (local) {
        registry_.insert(h, w->index());
        // The new task runs next here; wake a helper only for the task it displaced.
        if (w->schedule_next(frame.address()) && workers_.size() > 1) notify_parked();
        return;
    }
    registry_.insert(h, reinterpret_cast<std::uintptr_t>(h) / alignof(FrameHeader));
    inject_.push(frame.address());
    notify_parked();
    // Release: pairs with shutdown()'s acquire load; our push happens before its drain.
    external_.fetch_sub(1, std::memory_order_release);
}

void Scheduler::schedule(std::coroutine_handle<> frame) noexcept {
    if (Worker* w = current_worker(); w != nullptr && &w->scheduler() == this) {
        if (w->schedule_next(frame.address()) && workers_.size() > 1) notify_parked();
        return;
    }
    inject_.push(frame.address());
    notify_parked();
}

void Scheduler::schedule_external(InjectQueue::ProducerToken& token, void* const* frames,
                                  std::size_t n) noexcept {
    inject_.push_bulk(token, frames, n);
    notify_parked();
}

void Scheduler::notify_parked() noexcept {
    if (auto w = idle_.worker_to_notify()) workers_[*w]->parker().unpark();
}

void Scheduler::notify_if_work_pending() noexcept {
    for (auto& w : workers_) {
        if (!w->deque().empty()) {
            notify_parked();
            return;
        }
    }
    if (inject_.size_approx() > 0) notify_parked();
}

void Scheduler::report_unhandled(std::exception_ptr e) noexcept {
    if (config_.on_unhandled_exception) {
        try {
            config_.on_unhandled_exception(e);
            return;
        } catch (...) {
            std::fprintf(stderr, "eddy: on_unhandled_exception threw; reporting both\n");
            default_report(std::current_exception());
        }
    }
    default_report(e);
}

void Scheduler::report_unobserved(std::uint64_t scheduler_id, std::exception_ptr e) noexcept {
    std::function<void(std::exception_ptr)> hook;
    {
        std::lock_guard lock(g_live_mutex);
        if (auto it = g_live.find(scheduler_id); it != g_live.end()) hook = it->second->config_.on_unhandled_exception;
    }
    if (hook) {
        try {
            hook(e);
            return;
        } catch (...) {
            std::fprintf(stderr, "eddy: on_unhandled_exception threw; reporting both\n");
            default_report(std::current_exception());
        }
    }
    default_report(e);
}

std::coroutine_handle<> Scheduler::finish_root(void* ctx, PromiseBase& p, std::coroutine_handle<> self) noexcept {
    auto* sched = static_cast<Scheduler*>(ctx);
    FrameHeader* h = header_of(self.address());
    sched->registry_.remove(h);
    // Acq_rel: release publishes the result to the handle (its acquire in is_finished/take/
    // join_release); acquire pairs with the handle's RMWs so joiner/thread_waiter are seen.
    const std::uint32_t prev = h->state.fetch_or(FrameHeader::kComplete, std::memory_order_acq_rel);
    if ((prev & FrameHeader::kDetached) != 0) {
        if (p.exception()) sched->report_unhandled(p.exception());
        self.destroy();  // the handle is gone: this frees the allocation
        return std::noop_coroutine();
    }
    if ((prev & FrameHeader::kJoinWaiting) != 0) {
        // SAFETY: the joiner owns the handle and stays suspended until resumed, so h is
        // valid here; after resuming or queuing it we touch nothing.
        const std::coroutine_handle<> joiner = h->joiner;
        Scheduler* joiner_sched = h->joiner_sched;
        if (joiner_sched == sched) return joiner;  // symmetric transfer on this worker
        joiner_sched->schedule(joiner);
        return std::noop_coroutine();
    }
    if ((prev & FrameHeader::kThreadWaiting) != 0) {
        // SAFETY: the waiting thread owns the handle and does not return before this signal.
        h->thread_waiter->signal();
    }
    // Otherwise the handle is alive and nobody waits: it destroys the frame when dropped.
    return std::noop_coroutine();
}

} // namespace eddy::detail
