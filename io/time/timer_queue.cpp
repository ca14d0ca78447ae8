// io/time/timer_queue.cpp: see timer_queue.hpp and eddy/time/detail/timer.hpp.
#include "time/timer_queue.hpp"

#include "reactor/reactor.hpp"

#include <cerrno>

#include <eddy/runtime/detail/scheduler_api.hpp>

namespace eddy::detail {

TimerQueue& current_timer_queue(const char* what) {
    Reactor& reactor = current_reactor(what);  // WrongThread off a worker
    return reactor.timer_queue(reactor.host().current_worker_index());
}

bool arm_timer(TimerEntry& e) noexcept { return e.queue->arm(e); }

bool disarm_timer(TimerEntry& e) noexcept { return e.queue != nullptr && e.queue->disarm(e); }

void cancel_timer(TimerEntry& e) noexcept { e.queue->cancel(e); }

bool TimerQueue::arm(TimerEntry& e) noexcept {
    lock_.lock();
    if (e.state == TimerEntry::State::kCancelled) {  // a stop callback came first
        lock_.unlock();
        e.result = -ECANCELED;
        return false;
    }
    const std::int64_t needed = wheel_.insert(&e);
    e.state = TimerEntry::State::kQueued;
    size_.store(size_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    // Relaxed load under the lock (the only writers hold it); seq_cst store: see the header.
    const bool sooner = needed < earliest_.load(std::memory_order_relaxed);
    if (sooner) earliest_.store(needed, std::memory_order_seq_cst);
    lock_.unlock();
    // `e` may fire and its frame go from here on; the queue and the reactor stay.
    if (sooner) reactor_.timer_armed(needed);
    return true;
}

bool TimerQueue::disarm(TimerEntry& e) noexcept {
    lock_.lock();
    const bool queued = e.state == TimerEntry::State::kQueued;
    if (queued) {
        wheel_.remove(&e);
        e.state = TimerEntry::State::kIdle;
        size_.store(size_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    }
    lock_.unlock();
    return queued;
}

void TimerQueue::cancel(TimerEntry& e) noexcept {
    lock_.lock();
    switch (e.state) {
    case TimerEntry::State::kIdle:  // not armed yet: arm() will see it and not suspend
        e.state = TimerEntry::State::kCancelled;
        lock_.unlock();
        return;
    case TimerEntry::State::kQueued: {
        wheel_.remove(&e);
        e.state = TimerEntry::State::kCancelled;
        e.result = -ECANCELED;
        size_.store(size_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
        const std::coroutine_handle<> waiter = e.waiter;
        Scheduler& sched = reactor_.host().scheduler();
        lock_.unlock();
        schedule_on(&sched, waiter);  // the last touch of e
        return;
    }
    case TimerEntry::State::kFired:      // the reactor resumes it
    case TimerEntry::State::kCancelled:  // the other callback came first
        lock_.unlock();
        return;
    }
}

void TimerQueue::clear() noexcept {
    lock_.lock();
    wheel_.take_all([](TimerEntry& e) { e.state = TimerEntry::State::kCancelled; });
    size_.store(0, std::memory_order_relaxed);
    earliest_.store(kNone, std::memory_order_relaxed);
    lock_.unlock();
}

}  // namespace eddy::detail
