// runtime/blocking_pool.cpp: see blocking_pool.hpp.
#include "blocking_pool.hpp"

#include "settings.hpp"

#include <cstdio>
#include <system_error>
#include <thread>

#include <eddy/runtime/detail/scheduler_api.hpp>
#include <eddy/tasks/errors.hpp>

namespace eddy::detail {

struct BlockingPool::State {
    // Copied from the config: a thread left running after shutdown must not read the
    // Runtime's.
    std::size_t max_threads;
    std::chrono::milliseconds keep_alive;
    std::chrono::milliseconds shutdown_timeout;
    std::string name;
    std::function<void()> on_start, on_stop;

    mutable std::mutex lock;
    std::condition_variable work;      // a job was queued, or the pool closed
    std::condition_variable all_done;  // close() waits on it for running calls
    std::deque<BlockingJob*> queue;    // each holds the pool's reference
    std::size_t alive = 0, idle = 0, running = 0;
    std::uint64_t calls = 0, left_running = 0;
    bool closed = false;         // from then on, a call that ends resumes nothing
    Runtime* runtime = nullptr;  // the owner, for Runtime::current(); not read once closed
};

constinit thread_local BlockingPool::State* BlockingPool::t_state_ = nullptr;

BlockingPool::BlockingPool(const RuntimeConfig& config) : state_(std::make_shared<State>()) {
    State& s = *state_;
    s.max_threads = config.max_blocking_threads;
    s.keep_alive = config.blocking_keep_alive;
    s.shutdown_timeout = config.blocking_shutdown_timeout;
    s.name = thread_name(config, "blocking");
    s.on_start = config.on_thread_start;
    s.on_stop = config.on_thread_stop;
}

BlockingPool::~BlockingPool() { (void)close(); }

void BlockingPool::submit(BlockingJob& job) {
    State& s = *state_;
    std::lock_guard lock(s.lock);
    if (s.closed) throw RuntimeStopped("eddy::spawn_blocking: the runtime is shut down");
    // Idle threads beyond the queued jobs are free for this one; else start one if allowed.
    if (s.idle <= s.queue.size() && s.alive < s.max_threads) {
        try {
            std::thread(&BlockingPool::thread_main, state_).detach();
            ++s.alive;
            ++s.idle;  // until it takes a job
        } catch (const std::system_error& e) {
            // Queue anyway if a thread will get to it; else the call cannot run.
            if (s.alive == 0) throw std::system_error(e.code(), "eddy::spawn_blocking: cannot start a blocking thread");
        }
    }
    s.queue.push_back(&job);
    s.work.notify_one();
}

// NOLINTNEXTLINE(performance-unnecessary-value-param): by value, the thread's own reference
void BlockingPool::thread_main(std::shared_ptr<State> sp) noexcept {
    State& s = *sp;
    name_this_thread(s.name);
    run_thread_hook(s.on_start, "on_thread_start");
    // Between the hooks, as on a worker (its hooks run outside Worker::run): `sp` keeps the
    // state alive meanwhile.
    t_state_ = &s;
    std::unique_lock lock(s.lock);
    for (;;) {
        // Idle here (counted by submit() for a new thread, below after a job).
        const bool work = s.work.wait_for(lock, s.keep_alive, [&] { return !s.queue.empty() || s.closed; });
        if (!work || s.queue.empty()) break;  // kept alive long enough with nothing to do, or closed
        BlockingJob* job = s.queue.front();
        s.queue.pop_front();
        --s.idle;
        ++s.running;
        lock.unlock();
        job->run();
        Scheduler* sched = nullptr;
        const std::coroutine_handle<> waiter = job->finish(sched);
        lock.lock();
        --s.running;
        ++s.calls;
        // Under the lock: close() sets s.closed before the scheduler may go away.
        if (waiter && !s.closed) schedule_on(sched, waiter);
        job->release();
        ++s.idle;
        if (s.closed && s.running == 0) s.all_done.notify_all();
    }
    --s.idle;
    --s.alive;
    lock.unlock();
    t_state_ = nullptr;
    run_thread_hook(s.on_stop, "on_thread_stop");
}

std::size_t BlockingPool::close() noexcept {
    State& s = *state_;
    std::unique_lock lock(s.lock);
    if (s.closed) return s.left_running;
    s.closed = true;
    for (BlockingJob* job : s.queue) job->release();  // never started: their tasks are destroyed
    s.queue.clear();
    s.work.notify_all();  // idle threads exit
    s.all_done.wait_for(lock, s.shutdown_timeout, [&] { return s.running == 0; });
    s.left_running = s.running;
    if (s.left_running > 0)
        std::fprintf(stderr, "eddy: shutdown left %zu blocking call(s) running (blocking_shutdown_timeout %lld ms)\n",
                     s.running, static_cast<long long>(s.shutdown_timeout.count()));
    return s.left_running;
}

BlockingFigures BlockingPool::figures() const {
    const State& s = *state_;
    std::lock_guard lock(s.lock);
    return {
        .threads = s.alive, .idle = s.idle, .queued = s.queue.size(), .calls = s.calls, .left_running = s.left_running};
}

void BlockingPool::set_runtime(Runtime* owner) noexcept {
    std::lock_guard lock(state_->lock);
    state_->runtime = owner;
}

Runtime* BlockingPool::current_runtime(const char* what) {
    State* s = t_state_;
    if (s == nullptr) return nullptr;
    std::lock_guard lock(s->lock);
    if (s->closed) throw RuntimeStopped(std::string(what) + ": the runtime of this blocking thread is shut down");
    return s->runtime;
}

std::size_t BlockingPool::busy() const {
    const State& s = *state_;
    std::lock_guard lock(s.lock);
    return s.queue.size() + s.running;
}

}  // namespace eddy::detail
