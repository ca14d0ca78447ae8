// runtime/scheduler.cpp: see scheduler.hpp (shutdown protocol) and frame_header.hpp (the
// join protocol that finish_root implements).
#include "scheduler.hpp"

#include "hooks.hpp"
#include "settings.hpp"
#include "thread_waiter.hpp"

#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <system_error>
#include <unordered_map>

#include <eddy/runtime/abort_handle.hpp>
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

/// What RuntimeConfig::unhandled_exception says to do with `e`.
void report_with(UnhandledExceptionPolicy policy, const std::function<void(std::exception_ptr)>& hook,
                 const std::exception_ptr& e) noexcept {
    switch (policy) {
    case UnhandledExceptionPolicy::ignore:
        return;
    case UnhandledExceptionPolicy::terminate:
        default_report(e);
        std::fprintf(stderr, "eddy: terminating (RuntimeConfig::unhandled_exception is terminate)\n");
        std::terminate();
    case UnhandledExceptionPolicy::callback:
        if (hook) {
            try {
                hook(e);
                return;
            } catch (...) {
                std::fprintf(stderr, "eddy: on_unhandled_exception threw; reporting both\n");
                default_report(std::current_exception());
            }
        }
        break;
    case UnhandledExceptionPolicy::log:
        break;
    }
    default_report(e);
}

/// The CPUs of the calling thread's affinity mask, in increasing order.
std::vector<int> allowed_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        throw std::system_error(errno, std::generic_category(), "eddy: sched_getaffinity (RuntimeConfig::pin_workers)");
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) cpus.push_back(c);
    return cpus;
}

void check_pthread(int rc, const char* what) {
    if (rc != 0) throw std::system_error(rc, std::generic_category(), std::string("eddy: ") + what);
}

/// A worker thread's body: name, start hook, run loop, stop hook.
void* worker_main(void* arg) noexcept {
    auto* w = static_cast<Worker*>(arg);
    const RuntimeConfig& config = w->scheduler().config();
    // Named here too (start_worker names it from outside) so that the start hook sees the name.
    name_this_thread(thread_name(config, "worker-" + std::to_string(w->index())));
    // A write to a socket or pipe whose reader is gone raises SIGPIPE in the writing thread,
    // unless it passes MSG_NOSIGNAL, which sendfile(2) and write(2) cannot. Blocked here, a
    // SIGPIPE stays pending and harmless and the task gets EPIPE, as on the reactor thread.
    sigset_t pipe_only;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, nullptr);
    run_thread_hook(config.on_thread_start, "on_thread_start");
    w->run();
    run_thread_hook(config.on_thread_stop, "on_thread_stop");
    return nullptr;
}

/// Starts worker `w`'s thread (pthread: std::thread cannot set a stack size or an affinity).
/// `cpus`: empty, or the CPUs to pin to, round robin.
pthread_t start_worker(Worker& w, const RuntimeConfig& config, const std::vector<int>& cpus) {
    pthread_attr_t attr;
    check_pthread(pthread_attr_init(&attr), "pthread_attr_init");
    struct Destroy {
        pthread_attr_t* attr;
        ~Destroy() { pthread_attr_destroy(attr); }
    } destroy{&attr};
    if (config.stack_size != 0) {
        const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
        const std::size_t size = (config.stack_size + page - 1) / page * page;
        check_pthread(pthread_attr_setstacksize(&attr, size), "pthread_attr_setstacksize (RuntimeConfig::stack_size)");
    }
    if (!cpus.empty()) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[w.index() % cpus.size()], &one);
        check_pthread(pthread_attr_setaffinity_np(&attr, sizeof one, &one), "pthread_attr_setaffinity_np");
    }
    pthread_t thread;
    check_pthread(pthread_create(&thread, &attr, &worker_main, &w), "cannot start a worker thread");
    // Visible as soon as the Runtime constructor returns.
    (void)pthread_setname_np(thread, thread_name(config, "worker-" + std::to_string(w.index())).c_str());
    return thread;
}

}  // namespace

Scheduler::Scheduler(std::size_t workers, RuntimeConfig config)
    : config_(std::move(config)), id_(g_next_id.fetch_add(1, std::memory_order_relaxed)), idle_(workers),
      blocking_(config_), pause_(workers, stopping_), clock_(config_.clock) {
    calibrate_sched_ticks();  // once per process: the scheduling-delay histograms' clock
    workers_.reserve(workers);
    for (std::size_t i = 0; i < workers; ++i) workers_.push_back(std::make_unique<Worker>(*this, i));
    // Each subsystem gets what it works on, not the scheduler.
    std::vector<Worker*> watched;
    std::vector<Parker*> parkers;
    for (auto& w : workers_) {
        watched.push_back(w.get());
        parkers.push_back(&w->parker());
    }
    pause_.attach(std::move(parkers));
    watchdog_ = std::make_unique<Watchdog>(config_, std::move(watched), [this] { notify_parked(); });
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
        const std::vector<int> cpus = config_.pin_workers ? allowed_cpus() : std::vector<int>{};
        for (auto& w : workers_) threads_.push_back(start_worker(*w, config_, cpus));  // reserved: no throw
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
    close_door();
    (void)stop_and_destroy();
}

void Scheduler::close_door() noexcept {
    // Step 1. Acq_rel: pairs with spawn()'s acquire fetch_add, so a spawn either sees
    // kClosed or is counted before we wait.
    external_.fetch_or(kClosed, std::memory_order_acq_rel);
    // Acquire: pairs with spawn()'s release fetch_sub after its push.
    while ((external_.load(std::memory_order_acquire) & ~kClosed) != 0) std::this_thread::yield();
}

std::size_t Scheduler::stop_and_destroy() {
    // Step 2.
    stopping_.store(true, std::memory_order_relaxed);
    for (auto& w : workers_) w->parker().unpark();
    for (pthread_t t : threads_) pthread_join(t, nullptr);
    threads_.clear();
    if (driver_) driver_->shutdown();
    clock_.close();  // threads in Runtime::advance get RuntimeStopped; waiting tasks are destroyed below
    // Step 2b: blocking calls not started are dropped; running ones are given
    // blocking_shutdown_timeout to end (blocking_pool.hpp).
    (void)blocking_.close();

    // Step 3.
    for (auto& w : workers_) w->clear_queues();
    QueueItem drained[64];
    while (global_wakes_.pop_bulk(drained, 64) > 0) {
    }
    void* drained_spawns[64];
    while (global_spawns_.pop_bulk(drained_spawns, 64) > 0) {
    }

    // Step 4. Loop: destroying a frame never registers a task (spawns are refused now), but
    // a second pass costs nothing and keeps the invariant obvious.
    std::size_t destroyed = 0;
    for (auto all = registry_.take_all(); !all.empty(); all = registry_.take_all()) {
        for (FrameHeader* h : all) cancel(h);
        destroyed += all.size();
    }
    return destroyed;
}

void Scheduler::cancel(FrameHeader* h) noexcept {
    // Acq_rel: pairs with the JoinHandle's RMWs (join_suspend, join_wait, join_release), so
    // a thread waiter registered before is seen, and the handle sees kCancelled afterwards.
    const std::uint32_t prev =
        h->state.fetch_or(FrameHeader::kComplete | FrameHeader::kCancelled, std::memory_order_acq_rel);
    ThreadWaiter* waiter = (prev & FrameHeader::kThreadWaiting) != 0 ? h->thread_waiter : nullptr;
    if ((prev & FrameHeader::kJoinWaiting) != 0 && h->joiner_sched != this) {
        // A task of another runtime awaits this one: it resumes there and gets
        // RuntimeStopped. Its runtime is alive: its shutdown would wait in join_withdraw.
        h->joiner_sched->schedule(h->joiner);
        // Release: pairs with the joiner's acquire (join_settle, join_withdraw). We still
        // hold the frame's reference, so h outlives this RMW and the destroy below.
        h->state.fetch_or(FrameHeader::kJoinDone, std::memory_order_release);
    }
    destroyed_.fetch_add(1, std::memory_order_relaxed);
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
    p.set_finish(&root_hook_);
    void* item = frame.address();
    if (task_hooks_) [[unlikely]]
        item = note_spawn(h, item);
    if (local) {
        w->stats().spawned.add();
        registry_.insert(h, w->index());
        // The new task runs next here; wake a helper only for the task it displaced.
        if (w->schedule_next(item) && workers_.size() > 1) notify_parked();
        return;
    }
    registry_.insert(h, reinterpret_cast<std::uintptr_t>(h) / alignof(FrameHeader));
    external_spawned_.fetch_add(1, std::memory_order_relaxed);
    global_spawns_.push(item);
    notify_parked();
    // Release: pairs with shutdown()'s acquire load; our push happens before its drain.
    external_.fetch_sub(1, std::memory_order_release);
}

void* Scheduler::note_spawn(FrameHeader* h, void* item) {
    if (config_.on_task_spawn) call_task_hook(config_.on_task_spawn, "on_task_spawn", h);
    // The worker that takes a tagged item calls on_task_first_poll (Worker::before_poll).
    if (!config_.on_task_first_poll) return item;
    return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(item) | Worker::kFirstPollTag);
}

void Scheduler::schedule_item(void* item) noexcept {
    if (Worker* w = current_worker(); w != nullptr && &w->scheduler() == this) {
        if (w->schedule_woken(item) && workers_.size() > 1) notify_parked();
        return;
    }
    global_wakes_.push(QueueItem{item, sched_ticks()});
    note_global_wakes();
    notify_parked();
}

void Scheduler::deliver_from_driver(void* const* frames, std::size_t n) noexcept {
    push_bulk_woken(global_wakes_, driver_token_, frames, n, sched_ticks());
    note_global_wakes();
    notify_parked();
}

void Scheduler::notify_parked() noexcept {
    if (auto w = idle_.worker_to_notify()) workers_[*w]->parker().unpark();
}

void Scheduler::notify_if_work_pending() noexcept {
    for (auto& w : workers_) {
        if (w->has_queued()) {
            notify_parked();
            return;
        }
    }
    if (global_depth() > 0) notify_parked();
}

RuntimeMetrics Scheduler::metrics() const {
    RuntimeMetrics m;
    m.workers.reserve(workers_.size());
    // Figures of different threads are not synchronized: while tasks run, a completion may
    // be seen without its spawn, so the difference is clamped at zero.
    std::uint64_t completed = foreign_completed_.load(std::memory_order_relaxed);
    for (const auto& w : workers_) m.workers.push_back(w->metrics());
    for (std::size_t i = 0; i < m.workers.size(); ++i) m.workers[i].slow_polls = watchdog_->slow_polls(i);
    for (const WorkerMetrics& w : m.workers) completed += w.tasks_completed;
    const std::uint64_t destroyed = destroyed_.load(std::memory_order_relaxed);
    m.tasks_spawned = external_spawned_.load(std::memory_order_relaxed) + m.total(&WorkerMetrics::tasks_spawned);
    m.tasks_completed = completed;
    m.tasks_alive = m.tasks_spawned > completed + destroyed ? m.tasks_spawned - completed - destroyed : 0;
    m.global_queue_depth = global_depth();
    if (driver_) m.reactor = driver_->metrics();
    const BlockingFigures b = blocking_.figures();
    m.blocking_threads = b.threads;
    m.blocking_idle = b.idle;
    m.blocking_queued = b.queued;
    m.blocking_calls = b.calls;
    m.blocking_left_running = b.left_running;
    return m;
}

void Scheduler::report_unhandled(const std::exception_ptr& e) noexcept {
    report_with(effective_policy(config_), config_.on_unhandled_exception, e);
}

void Scheduler::report_unobserved(std::uint64_t scheduler_id, const std::exception_ptr& e) noexcept {
    // The runtime may be gone: its policy and hook are copied under the lock (gone: log).
    UnhandledExceptionPolicy policy = UnhandledExceptionPolicy::log;
    std::function<void(std::exception_ptr)> hook;
    {
        std::lock_guard lock(g_live_mutex);
        if (auto it = g_live.find(scheduler_id); it != g_live.end()) {
            policy = effective_policy(it->second->config_);
            if (policy == UnhandledExceptionPolicy::callback) hook = it->second->config_.on_unhandled_exception;
        }
    }
    report_with(policy, hook, e);
}

std::coroutine_handle<> Scheduler::finish_root(void* ctx, PromiseBase& p, std::coroutine_handle<> self) noexcept {
    auto* sched = static_cast<Scheduler*>(ctx);
    FrameHeader* h = header_of(self.address());
    if (sched->config_.on_task_complete) [[unlikely]]
        call_task_hook(sched->config_.on_task_complete, "on_task_complete", h);
    sched->registry_.remove(h);
    if (Worker* w = current_worker(); w != nullptr && &w->scheduler() == sched) {
        w->stats().completed.add();
    } else {
        sched->foreign_completed_.fetch_add(1, std::memory_order_relaxed);
    }
    // Acq_rel: release publishes the result to the handle (its acquire in is_finished/take/
    // join_release); acquire pairs with the handle's RMWs so joiner/thread_waiter are seen.
    // An aborted task's exception is how it stopped, as its owner asked: not reported.
    AbortState* abort = abort_state_of(h);
    const bool aborted = abort != nullptr && !abort->finish();
    const std::uint32_t prev = h->state.fetch_or(FrameHeader::kComplete, std::memory_order_acq_rel);
    if ((prev & FrameHeader::kDetached) != 0) {
        if (p.exception() && !aborted) sched->report_unhandled(p.exception());
        self.destroy();  // the handle is gone: this frees the allocation
        return std::noop_coroutine();
    }
    if ((prev & FrameHeader::kJoinWaiting) != 0) {
        // SAFETY: the joiner owns the handle and stays suspended until resumed, so h is
        // valid here; after resuming or queuing it we touch nothing.
        const std::coroutine_handle<> joiner = h->joiner;
        Scheduler* joiner_sched = h->joiner_sched;
        if (joiner_sched == sched) return joiner;  // symmetric transfer on this worker
        // A joiner of another runtime (frame_header.hpp, "Joins across runtimes"): that
        // runtime cannot be gone before kJoinDone (its shutdown waits in join_withdraw), and
        // the joiner does not take the result (which may free h) before it either.
        joiner_sched->schedule(joiner);
        // Release: pairs with the acquire of join_settle / join_withdraw. The last touch of h.
        h->state.fetch_or(FrameHeader::kJoinDone, std::memory_order_release);
        return std::noop_coroutine();
    }
    if ((prev & FrameHeader::kThreadWaiting) != 0) {
        // SAFETY: the waiting thread owns the handle and does not return before this signal.
        h->thread_waiter->signal();
    }
    // Otherwise the handle is alive and nobody waits: it destroys the frame when dropped.
    return std::noop_coroutine();
}

}  // namespace eddy::detail
