// eddy/runtime/event.hpp: Event, a flag that is set once and wakes every task awaiting it.
//
//     eddy::Event ready;
//     ... co_await ready;       // in any number of tasks: suspends until set (or returns)
//     ... ready.set();         // from any thread, task or not; later sets do nothing
//
// Waking never resumes a waiter inline inside set(): each waiter is queued on a worker of
// the runtime it awaited from (the setter's own worker when that is the same runtime).
// Awaiting off a worker thread throws eddy::WrongThread. The Event must outlive its waiters.
//
// State encoding (one atomic pointer, after folly::coro::Baton): nullptr = not set, no
// waiter; `this` = set; anything else = the newest waiter, each linking to the one before.
#pragma once

#include <atomic>
#include <coroutine>

#include <eddy/runtime/detail/scheduler_api.hpp>

namespace eddy {

class Event {
public:
    Event() noexcept = default;
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;

    bool is_set() const noexcept {
        // Acquire: pairs with set()'s exchange, so what the setter did is visible.
        return state_.load(std::memory_order_acquire) == this;
    }

    /// Sets the event and queues every waiter. Idempotent.
    void set() noexcept {
        // Acq_rel: release publishes the setter's writes to waiters that see `this`; acquire
        // pairs with the waiters' CAS so their Awaiter fields are visible here.
        void* old = state_.exchange(this, std::memory_order_acq_rel);
        if (old == this) return;
        for (auto* w = static_cast<Awaiter*>(old); w != nullptr;) {
            Awaiter* next = w->next_;  // read before queuing: the waiter may run at once
            detail::schedule_on(w->scheduler_, w->waiter_);
            w = next;
        }
    }

    class Awaiter {
    public:
        explicit Awaiter(Event& e) noexcept : event_(e) {}
        bool await_ready() const noexcept { return event_.is_set(); }
        bool await_suspend(std::coroutine_handle<> waiter) {
            scheduler_ = &detail::require_worker("co_await on an eddy::Event");
            waiter_ = waiter;
            void* old = event_.state_.load(std::memory_order_acquire);
            do {
                if (old == &event_) return false;  // set meanwhile: do not suspend
                next_ = static_cast<Awaiter*>(old);
                // Release: publishes this awaiter's fields to set(); acquire on failure
                // re-reads a possibly set state.
            } while (!event_.state_.compare_exchange_weak(old, this, std::memory_order_release,
                                                          std::memory_order_acquire));
            return true;  // SAFETY: after the CAS, set() may resume us: touch nothing
        }
        void await_resume() const noexcept {}

    private:
        friend class Event;
        Event& event_;
        Awaiter* next_ = nullptr;
        std::coroutine_handle<> waiter_;
        detail::Scheduler* scheduler_ = nullptr;
    };
    Awaiter operator co_await() noexcept { return Awaiter(*this); }

private:
    std::atomic<void*> state_{nullptr};
};

} // namespace eddy
