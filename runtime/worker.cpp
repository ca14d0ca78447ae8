// runtime/worker.cpp: see worker.hpp for the run loop.
#include "worker.hpp"

#include "hooks.hpp"
#include "scheduler.hpp"

#include <eddy/runtime/detail/coop_budget.hpp>
#include <eddy/runtime/detail/scheduler_api.hpp>
#include <eddy/tasks/detail/await_trace.hpp>
#include <eddy/tasks/detail/frame_pool.hpp>

#include <algorithm>
#include <chrono>
#include <utility>

namespace eddy::detail {
namespace {
// Initial-exec: a static TLS slot, one instruction to read, even inside a shared library
// loaded at start-up (eddy is not meant to be dlopen'ed into a process late).
[[gnu::tls_model("initial-exec")]] thread_local Worker* t_worker = nullptr;
}  // namespace

Worker* current_worker() noexcept { return t_worker; }

Worker::Worker(Scheduler& scheduler, std::size_t index)
    : sched_(scheduler), index_(index), unwatched_(&scheduler.unwatched_flag()),
      watch_every_poll_(scheduler.config().slow_poll_threshold.count() > 0),
      instrumented_(scheduler.config().on_poll_start || scheduler.config().on_poll_end ||
                    scheduler.config().on_task_first_poll || scheduler.config().poll_time_histogram),
      time_polls_(scheduler.config().poll_time_histogram), deque_(kLocalQueueCapacity), wakes_(kWakeQueueCapacity),
      wake_producer_(scheduler.global_wakes()), wake_consumer_(scheduler.global_wakes()),
      spawn_producer_(scheduler.global_spawns()), spawn_consumer_(scheduler.global_spawns()),
      global_queue_interval_(scheduler.config().global_queue_interval), global_countdown_(global_queue_interval_),
      rng_(0x9E3779B97F4A7C15ull * (index + 1)) {}

void Worker::run() {
    t_worker = this;
    while (!sched_.stopping()) {
        void* task = next_task();
        if (driver_pending_ && (task == nullptr || tick_ % kDriverFlushInterval == 0)) {
            driver_pending_ = false;
            sched_.flush_driver();
        }
        if (task == nullptr) task = steal_work();
        if (task == nullptr) {
            // A driver that holds completions back while every worker runs must hand them
            // over now, while this worker spins for work (Driver::worker_out_of_work).
            const bool delivery_due = sched_.driver_out_of_work(false);
            task = spin_for_work(delivery_due);
        }
        if (task == nullptr) {
            park();
            continue;
        }
        if (searching_) leave_searching();
        if (instrumented_) [[unlikely]]
            task = before_poll(task);
        sched_.pause().point(index_, task);  // a task dump (worker_pause.hpp)
        stats_.polled.add();
        t_coop_budget = kCoopBudget;  // every poll starts with a full budget
        const std::uint64_t seq = poll_seq_.load(std::memory_order_relaxed);
#if EDDY_TASK_DUMP
        if (watch_every_poll_) {
            site_.publish(task);
            // Release: publishes site_ to PollSite::read()'s acquire load of the odd number.
            poll_seq_.store(seq + 1, std::memory_order_release);
        } else {
            poll_seq_.store(seq + 1, std::memory_order_relaxed);  // odd: polling
        }
#else
        poll_seq_.store(seq + 1, std::memory_order_relaxed);  // odd: polling
#endif
        poll_ticks_ = 0;  // this poll's wake-ups read the clock afresh (wake_stamp)
        // SAFETY: every queued item is a suspended coroutine frame, or a Runnable, that
        // nobody else will resume or run: whoever queued it handed that right over.
        run_queue_item(task);
        poll_seq_.store(seq + 2, std::memory_order_relaxed);
        if (instrumented_) [[unlikely]]
            after_poll();
    }
    t_worker = nullptr;
}

void* Worker::before_poll(void* task) {
    const RuntimeConfig& c = sched_.config();
    if ((reinterpret_cast<std::uintptr_t>(task) & kFirstPollTag) != 0) {
        task = untag_first_poll(task);
        call_task_hook(c.on_task_first_poll, "on_task_first_poll", header_of(task));
    }
    if (c.on_poll_start) call_worker_hook(c.on_poll_start, "on_poll_start", index_);
    if (time_polls_) poll_started_ = sched_ticks();
    return task;
}

void Worker::after_poll() {
    if (time_polls_) poll_time_.record(poll_started_, sched_ticks());
    const RuntimeConfig& c = sched_.config();
    if (c.on_poll_end) call_worker_hook(c.on_poll_end, "on_poll_end", index_);
}

void* Worker::next_task() {
    ++tick_;
    if (--global_countdown_ == 0) {
        // Spawned work cannot starve behind woken work: a task spawned from elsewhere runs
        // now, and the next one the spawn deque gives is its oldest.
        global_countdown_ = global_queue_interval_;
        if (void* task = nullptr; pop_global_spawn(task)) {
            lifo_runs_ = 0;
            return task;
        }
        oldest_spawn_next_ = true;
    }
    // Wake-ups from outside this worker first (worker.hpp, "Input first").
    if (void* task = take_global_wake()) return task;
    // Relaxed first look, so that an empty slot costs no read-modify-write; acquire on the
    // exchange pairs with the release of the one that filled it (fill_slot).
    if (lifo_slot_.load(std::memory_order_relaxed) != nullptr) {
        if (void* slot = lifo_slot_.exchange(nullptr, std::memory_order_acquire)) {
            // The cap (worker.hpp): after kMaxLifoRuns slot runs in a row, the slot's task
            // joins its queue and a queued task runs first. Alone, it just runs.
            if (lifo_runs_ < kMaxLifoRuns || !has_queued()) {
                ++lifo_runs_;
                return untag(slot);
            }
            const std::uint64_t now = sched_ticks();  // stamps the one, times the other
            requeue(slot, now);
            lifo_runs_ = 0;
            global_run_ = 0;
            // Another task than the slot's: the other queue's, else the oldest of its own.
            QueueItem item;
            void* task = nullptr;
            if ((reinterpret_cast<std::uintptr_t>(slot) & kWokenTag) != 0) {
                if (deque_.pop(task)) return task;
                if (pop_wake(item)) return take(item, now);
            } else {
                if (pop_wake(item)) return take(item, now);
                if (deque_.pop_top(task)) return task;
            }
        }
    }
    lifo_runs_ = 0;
    global_run_ = 0;
    if (void* task = take_queued()) return task;
    if (void* task = take_global()) return task;
    // A loop, not an `if`: thieves may steal every refilled task before our pop, and the
    // yield list is private, so leaving it non-empty here would park a worker on runnable
    // tasks nobody else can see (found by the yield_now stress test with 4-slot deques).
    void* task = nullptr;
    while (!deferred_.empty()) {
        refill_from_deferred();
        if (deque_.pop(task)) return task;
    }
    return nullptr;
}

[[gnu::always_inline]] inline void* Worker::take_global_wake() {
    // The reactor (or another thread) delivered since the last look: the queue may hold
    // tasks. A pop that finds none clears the mark; a later delivery sets it again.
    if (const std::uint64_t pushes = sched_.global_wake_pushes(); pushes != seen_wake_pushes_) {
        seen_wake_pushes_ = pushes;
        global_maybe_ = true;
    }
    // A share pulled into the wake queue (pull_global_wakes) runs first: its tasks were
    // woken before anything still in the global queue.
    if (!global_maybe_ || global_run_ >= kMaxGlobalRun || wakes_.top_index() < share_end_) return nullptr;
    QueueItem item;
    if (sched_.global_wakes().pop_bulk(wake_consumer_, &item, 1) == 0) {
        global_maybe_ = false;
        return nullptr;
    }
    ++global_run_;
    stats_.global_takes.add();
    return take(item);
}

[[gnu::always_inline]] inline void* Worker::take_queued(std::uint64_t now) {
    // While both queues hold tasks they take turns, so neither kind of work starves the
    // other; alone, either runs. (A fork-join tree's wake queue is empty: its children run
    // depth first; a service's spawn deque is mostly empty: its wake-ups run in order.)
    QueueItem item;
    if (spawn_turn_) {
        spawn_turn_ = false;
        if (void* task = take_spawned()) return task;
    }
    if (wakes_maybe_) {
        if (pop_wake(item)) {
            spawn_turn_ = true;
            return take(item, now);
        }
        if (wakes_.empty()) wakes_maybe_ = false;  // else a thief won the race for it
    }
    return take_spawned();
}

[[gnu::always_inline]] inline void* Worker::take_spawned() {
    void* task = nullptr;
    if (spawns_maybe_) {
        if (oldest_spawn_next_) {
            oldest_spawn_next_ = false;
            if (deque_.pop_top(task)) return task;
        }
        if (deque_.pop(task)) return task;
        spawns_maybe_ = false;  // a failed pop leaves it empty (a thief took the last one)
    }
    // An empty deque takes the yield list (worker.hpp): yielded tasks are served in the
    // spawn deque's turns, behind everything runnable here: the global queues first.
    if (deferred_.empty()) return nullptr;
    if ((task = take_global()) != nullptr) return task;
    refill_from_deferred();
    return deque_.pop(task) ? task : nullptr;
}

std::size_t Worker::pull_global_wakes() {
    // The share (worker.hpp, "The global queues"): the first chunk tells whether there is
    // more than kGlobalBatch; only then is the depth estimated (a walk over its producers).
    InjectQueue& global = sched_.global_wakes();
    const std::size_t room = wakes_.capacity() - wakes_.size();
    QueueItem chunk[kGlobalBatch];
    std::size_t n = global.pop_bulk(wake_consumer_, chunk, std::min(kGlobalBatch, room));
    std::size_t taken = n;
    for (std::size_t i = 0; i < n; ++i) (void)wakes_.push(chunk[i]);  // in order, within room
    if (n > 0) wakes_maybe_ = true;
    if (n == kGlobalBatch) {
        const std::size_t share =
            std::min(room, std::max(taken, (global.size_approx() + taken) / sched_.num_workers()));
        while (taken < share &&
               (n = global.pop_bulk(wake_consumer_, chunk, std::min(kGlobalBatch, share - taken))) != 0) {
            for (std::size_t i = 0; i < n; ++i) (void)wakes_.push(chunk[i]);
            taken += n;
        }
    }
    if (taken == 0) return 0;
    share_end_ = wakes_.bottom_index();  // runs before the global queue is looked at again
    stats_.global_takes.add(taken);
    if (taken > 1 && sched_.num_workers() > 1) sched_.notify_parked();  // the rest can be stolen
    return taken;
}

bool Worker::pop_global_spawn(void*& out) {
    if (sched_.global_spawns().pop_bulk(spawn_consumer_, &out, 1) == 0) return false;
    stats_.global_takes.add();
    return true;
}

void* Worker::take_global() {
    QueueItem item;
    if (pull_global_wakes() > 0 && pop_wake(item)) return take(item);
    // Spawned work: a batch, as many as the spawn deque has room for, pushed newest first
    // so that its pops (newest first) run them in the order they were spawned.
    void* batch[kGlobalBatch];
    const std::size_t room = deque_.capacity() - deque_.size() + 1;  // + the one returned
    const std::size_t n = sched_.global_spawns().pop_bulk(spawn_consumer_, batch, std::min(kGlobalBatch, room));
    if (n == 0) return nullptr;
    stats_.global_takes.add(n);
    for (std::size_t i = n; i-- > 1;) (void)deque_.push(batch[i]);  // room checked above
    if (n > 1) spawns_maybe_ = true;
    if (n > 1 && sched_.num_workers() > 1) sched_.notify_parked();  // the rest can be stolen
    return batch[0];
}

void Worker::refill_from_deferred() {
    // The oldest yielded tasks go to the (empty) spawn deque, where idle workers can steal
    // them; as many as fit, the rest stay in line. Pushed newest first, so that the owner's
    // pops (newest first) run them oldest first.
    const std::size_t n = std::min(deque_.capacity() - deque_.size(), deferred_.size());
    for (std::size_t i = n; i-- > 0;) (void)deque_.push(deferred_[i]);  // room checked above
    if (n > 0) spawns_maybe_ = true;
    deferred_.erase(deferred_.begin(), deferred_.begin() + static_cast<std::ptrdiff_t>(n));
    if (n > 1 && sched_.num_workers() > 1) sched_.notify_parked();
}

void* Worker::steal_work() {
    // Searching even with one worker: the last searcher's final look (idle.hpp rule 4) is
    // what protects a parking worker from a concurrent injection.
    if (!searching_) {
        if (!sched_.idle().transition_to_searching()) return nullptr;
        searching_ = true;
    }
    const std::size_t n = sched_.num_workers();
    const std::size_t start = static_cast<std::size_t>(next_random() % n);
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t victim = (start + i) % n;
        if (victim == index_) continue;
        // The wake queue first: its tasks were woken before anything spawned since.
        Worker& v = sched_.worker(victim);
        stats_.steal_attempts.add();
        QueueItem woken;
        if (const std::size_t got = v.wakes_.steal_into(wakes_, woken); got > 0) {
            if (got > 1) wakes_maybe_ = true;
            stats_.steals.add();
            stats_.stolen.add(got);
            return take(woken);
        }
        void* spawned = nullptr;
        if (const std::size_t got = v.deque_.steal_into(deque_, spawned); got > 0) {
            if (got > 1) spawns_maybe_ = true;
            stats_.steals.add();
            stats_.stolen.add(got);
            return spawned;
        }
    }
    if (void* task = take_global()) return task;
    // Last, the slot of a worker stuck in a long poll (marked by the watchdog).
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t victim = (start + i) % n;
        if (victim == index_) continue;
        if (void* slot = sched_.worker(victim).steal_slot()) {
            stats_.steals.add();
            stats_.stolen.add();
            return slot;
        }
    }
    return nullptr;
}

void Worker::wake_watchdog() noexcept { sched_.driver_watch(); }

void* Worker::steal_slot() noexcept {
    // The rarely written mark first: a busy worker's own lines stay in its cache.
    const std::uint64_t stale = stale_seq_.load(std::memory_order_relaxed);
    if (stale == 0 || poll_seq_.load(std::memory_order_relaxed) != stale) return nullptr;
    if (lifo_slot_.load(std::memory_order_relaxed) == nullptr) return nullptr;
    // Acquire: pairs with the release of fill_slot's exchange, which published the task.
    void* slot = lifo_slot_.exchange(nullptr, std::memory_order_acquire);
    return slot != nullptr ? untag(slot) : nullptr;
}

void* Worker::spin_for_work(bool delivery_due) {
    // Only a searcher spins: a worker refused the searching role (enough searchers already)
    // parks at once, and those searchers will find whatever arrives. And only while work may
    // come soon: from another running worker (a spawn, a wake-up to steal), or from the I/O
    // driver that this worker just asked for completions it had pending. Otherwise spinning
    // only burns a core that a busy neighbour (another process, the reactor) could use.
    // A spawn from outside the runtime since our last look also counts (spawn_remote: the
    // next one is usually microseconds away).
    const std::uint64_t external = sched_.external_spawns();
    const bool external_active = external != seen_external_spawns_;
    seen_external_spawns_ = external;
    int rounds = kSpinRounds;
    if (sched_.idle().num_unparked() <= 1 && !external_active) rounds = delivery_due ? kSpinRoundsForDriver : 0;
    for (int round = 0; searching_ && round < rounds && !sched_.stopping(); ++round) {
        for (int i = 0; i < kPausesPerRound; ++i) cpu_relax();
        if (void* task = steal_work()) return task;
    }
    return nullptr;
}

void Worker::leave_searching() noexcept {
    searching_ = false;
    if (sched_.idle().transition_from_searching()) sched_.notify_parked();  // idle.hpp rule 3
}

void Worker::park() {
    Idle& idle = sched_.idle();
    idle.transition_to_parked(index_, searching_);
    searching_ = false;
    stats_.parks.add();
    sched_.notify_if_work_pending();  // idle.hpp rule 4
    // Once more after parking (a seq_cst RMW of the idle state): a driver that began to hold
    // completions back after our first call, seeing us still unparked, sees us parked now
    // or is told here (Driver::worker_out_of_work).
    sched_.driver_out_of_work(true);
    // Idle: give back the frame memory of a burst (frame_pool.hpp, "Giving memory back").
    frame_pool::trim();
    while (!sched_.stopping()) {
        parker_.park();
        sched_.pause().point(index_, nullptr);  // a task dump wakes every worker (worker_pause.hpp)
#if EDDY_TASK_DUMP
        refresh_coarse_clock(std::chrono::steady_clock::now());  // what waits from now on is timed from here
#endif
        if (idle.transition_from_parked(index_)) {
            stats_.unparks.add();
            // The long-poll detector watches every poll, not only those with a task in the
            // slot: then a woken worker always makes the driver watch (a seq_cst load, and
            // an eventfd write when it slept unwatched: about 9 % of `fanout` with 2
            // workers, so only when asked for).
            if (watch_every_poll_ && unwatched_->load(std::memory_order_seq_cst)) sched_.driver_watch();
            sched_.clock().wait_for_jump();  // a virtual clock moving now moves before we run
            searching_ = true;               // a notifier counted us as searching
            return;
        }
    }
}

template <class T, class Global>
void Worker::push_overflowing(ChaseLevDeque<T>& q, Global& global, typename Global::ProducerToken& token,
                              T item) noexcept {
    while (!q.push(item)) {
        // Full: move the older half to the global queue of its kind, where any worker can
        // take it. Woken tasks keep their stamps: their wait goes on counting there.
        T batch[kWakeQueueCapacity / 2];
        const std::size_t n = q.pop_top_batch(batch, q.capacity() / 2);
        if (n > 0) {
            global.push_bulk(token, batch, n);
            stats_.overflows.add();
            stats_.overflowed.add(n);
        }
        // n == 0: thieves raced us and made room; retry the push.
    }
}

void Worker::overflow_wake(QueueItem item) noexcept {
    push_overflowing(wakes_, sched_.global_wakes(), wake_producer_, item);
    // The older half, a pulled share's oldest tasks among it, now waits in the global wake
    // queue, which runs first: what is left here is younger (worker.hpp, "The bound").
    share_end_ = 0;
    sched_.note_global_wakes();
}

void Worker::overflow_spawn(void* task) noexcept {
    push_overflowing(deque_, sched_.global_spawns(), spawn_producer_, task);
}

WorkerMetrics Worker::metrics() const noexcept {
    WorkerMetrics m;
    m.tasks_polled = stats_.polled.get();
    m.tasks_spawned = stats_.spawned.get();
    m.tasks_completed = stats_.completed.get();
    m.steal_attempts = stats_.steal_attempts.get();
    m.steals = stats_.steals.get();
    m.tasks_stolen = stats_.stolen.get();
    m.global_queue_takes = stats_.global_takes.get();
    m.parks = stats_.parks.get();
    m.unparks = stats_.unparks.get();
    m.overflows = stats_.overflows.get();
    m.tasks_overflowed = stats_.overflowed.get();
    m.budget_yields = stats_.budget_yields.get();
    m.local_queue_depth = deque_.size() + wakes_.size();
    m.scheduling_delay = delay_.snapshot();
    m.poll_time = poll_time_.snapshot();
    return m;
}

void Worker::clear_queues() noexcept {
    void* task = nullptr;
    while (deque_.pop(task)) {
    }
    QueueItem item;
    while (wakes_.pop(item)) {
    }
    share_end_ = 0;  // pop() lowered the wake queue's bottom, maybe below a share's end
    lifo_slot_.store(nullptr, std::memory_order_relaxed);
    deferred_.clear();
}

std::uint64_t Worker::next_random() noexcept {
    // xorshift64*: victim selection only needs to spread thieves out.
    rng_ ^= rng_ >> 12;
    rng_ ^= rng_ << 25;
    rng_ ^= rng_ >> 27;
    return rng_ * 0x2545F4914F6CDD1Dull;
}

}  // namespace eddy::detail
