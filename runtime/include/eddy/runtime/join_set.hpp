//! eddy/runtime/join_set.hpp: JoinSet<T>, a set of spawned tasks whose results are taken in
//! the order they finish (Tokio's JoinSet).
//!
//!     eddy::JoinSet<std::size_t> set;
//!     for (auto& url : urls) set.spawn(fetch(url));
//!     while (auto n = co_await set.join_next()) total += *n;   // completion order
//!
//! Semantics:
//!   * `spawn(task)` starts the task at once (eddy::spawn_abortable: it runs in parallel on
//!     the workers) and returns its AbortHandle. The set holds its result until taken.
//!   * `co_await join_next()` gives the result of a finished task that was not taken yet, in
//!     the order they finished, suspending while tasks run and none has finished;
//!     std::nullopt once the set is empty (nothing running, nothing to take). A task's
//!     exception is rethrown by the join_next that takes it (the set stays usable: call
//!     join_next again for the others); an aborted task that ended by an exception gives
//!     eddy::TaskAborted. `try_join_next()` never suspends (std::nullopt: nothing finished).
//!   * `abort_all()` aborts every task still running (eddy/runtime/abort_handle.hpp); they
//!     stay in the set until join_next takes their outcomes. Destroying the set aborts its
//!     running tasks and discards every result; the tasks unwind on their own, nothing waits
//!     for them (as in Tokio; use a TaskGroup when the parent must wait).
//!   * `size()` counts the tasks running plus the results not taken.
//!   * Cost per task: the task's frame, a small runner frame, an abort state and a list node.
//!   * `JoinSet<void>` gives std::optional<std::monostate>: `while (co_await set.join_next())`.
//!
//! Who may call what: the set belongs to one owner at a time (a task, or code running one step
//! of it): spawn, join_next, try_join_next, abort_all and the destructor are not called
//! concurrently with each other; size() from anywhere. spawn and join_next need a runtime
//! worker (eddy::WrongThread otherwise); spawning an empty task throws eddy::BrokenTask.
//! The tasks hold the set's shared state, not the set: the set may be destroyed (or moved)
//! while they run.
//!
//! Cancellation: a join_next cancelled while it waits resumes with eddy::OperationCancelled
//! and takes nothing; one that was handed a result before the cancel took effect returns it.
//! @file
#pragma once

#include <cstddef>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <eddy/runtime/abort_handle.hpp>
#include <eddy/runtime/detail/scheduler_api.hpp>
#include <eddy/tasks/detail/spin_lock.hpp>
#include <eddy/runtime/detail/wait_queue.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/awaitable.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy {

/// A set of spawned tasks whose results are taken in the order they finish (see the file's
/// prologue): Tokio's JoinSet.
template <class T>
class JoinSet {
    static_assert(std::is_void_v<T> || std::is_move_constructible_v<T>,
                  "eddy::JoinSet<T>: T must be void or move-constructible");
    static_assert(!std::is_reference_v<T>, "eddy::JoinSet<T&> is not supported; return pointers instead");

public:
    /// What join_next() gives per task: T, or std::monostate for void.
    using value_type = std::conditional_t<std::is_void_v<T>, std::monostate, T>;
    class NextAwaiter;

private:
    struct Outcome {
        std::optional<value_type> value;
        std::exception_ptr error;
        bool aborted = false;
    };

    // One per running task: linked in the set while its task runs.
    struct Member {
        AbortHandle abort;
        Member* prev = nullptr;
        Member* next = nullptr;
        detail::AbortState* state() const noexcept { return abort.state_of(); }
    };

    struct Shared {
        detail::SpinLock lock;
        detail::WaitQueue waiters{lock};
        std::deque<Outcome> ready;  // guarded by lock
        Member* members = nullptr;  // guarded by lock
        std::size_t live = 0;       // guarded by lock: members linked

        ~Shared() {
            // Members whose runner shutdown destroyed before it finished.
            while (members != nullptr) delete std::exchange(members, members->next);
        }

        // --- lock held ---
        void link(Member* m) noexcept {
            m->next = members;
            if (members != nullptr) members->prev = m;
            members = m;
            ++live;
        }
        void unlink(Member* m) noexcept {
            if (m->prev != nullptr) {
                m->prev->next = m->next;
            } else {
                members = m->next;
            }
            if (m->next != nullptr) m->next->prev = m->prev;
            --live;
        }
        Outcome pop_locked() {
            Outcome o = std::move(ready.front());
            ready.pop_front();
            return o;
        }

        /// A runner's last step: its outcome into the set, handed to a waiting join_next.
        void finish(Member* m, Outcome o) {
            detail::WakeList wakes;
            std::unique_ptr<Member> gone;
            std::exception_ptr lost;
            {
                std::lock_guard guard(lock);
                unlink(m);
                gone.reset(m);
                try {
                    ready.push_back(std::move(o));
                } catch (...) {
                    lost = std::current_exception();  // out of memory: the runner reports it
                }
                if (!ready.empty()) {
                    if (auto* w = static_cast<NextAwaiter*>(waiters.front())) {
                        w->outcome_.emplace(pop_locked());
                        waiters.grant_front(wakes);
                    }
                }
                if (live == 0 && ready.empty()) waiters.grant_all(wakes);  // the rest: nullopt
            }
            wakes.wake_all();
            if (lost) std::rethrow_exception(lost);
        }
    };

public:
    JoinSet() : shared_(std::make_shared<Shared>()) {}
    /// Takes the other set's tasks over; the moved-from set is empty and throws BrokenTask
    /// on use.
    JoinSet(JoinSet&&) noexcept = default;
    /// Aborts this set's tasks (as the destructor does), then takes the other's over.
    JoinSet& operator=(JoinSet&& other) noexcept {
        if (this != &other) {
            abort_all();
            shared_ = std::move(other.shared_);
        }
        return *this;
    }
    JoinSet(const JoinSet&) = delete;
    JoinSet& operator=(const JoinSet&) = delete;
    /// Aborts the tasks still running and drops every result (see above).
    ~JoinSet() { abort_all(); }

    /// Starts `task` in the set; its AbortHandle aborts it alone.
    AbortHandle spawn(Task<T> task) {
        if (!task) throw BrokenTask("eddy::JoinSet::spawn: the task is empty (moved-from or already awaited)");
        detail::Scheduler& sched = detail::require_worker("eddy::JoinSet::spawn");
        auto member = std::make_unique<Member>();
        Task<void> runner = run(shared_, std::move(task), member.get());
        auto h = detail::TaskAccess::release(runner);
        detail::make_abortable(h.promise(), h);  // on failure: h destroyed, member freed
        member->abort = AbortHandle(detail::abort_state_of(detail::header_of(h.address())));
        AbortHandle result = member->abort;
        Member* const member_ptr = member.release();  // the set owns it until the runner unlinks it
        {
            std::lock_guard guard(shared_->lock);
            shared_->link(member_ptr);
        }
        // The runner's own handle is dropped at once (detached): it reports to the set.
        try {
            detail::spawn_root(&sched, h.promise(), h);
        } catch (...) {
            std::lock_guard guard(shared_->lock);  // refused (shutdown): the runner is gone
            shared_->unlink(member_ptr);
            delete member_ptr;
            throw;
        }
        detail::join_release(detail::header_of(h.address()), &h.promise(), true);
        return result;
    }

    /// The same for an awaitable that owns what it uses (refused at compile time otherwise:
    /// eddy/tasks/awaitable.hpp, "Who owns the operation").
    template <detail::NonTaskAwaitable A>
    AbortHandle spawn(A&& a) {
        return spawn(detail::detached_task(std::forward<A>(a)));
    }

    /// What join_next() returns: awaiting it gives the next finished task's result.
    class [[nodiscard]] NextAwaiter : public detail::WaitAwaiter<NextAwaiter> {
    public:
        static constexpr const char* kWhat = "co_await on eddy::JoinSet::join_next()";
        static constexpr const char* kCancelled = "eddy::JoinSet::join_next: the wait was cancelled";

        /// Made by join_next().
        explicit NextAwaiter(std::shared_ptr<typename JoinSet::Shared> s) noexcept
            : detail::WaitAwaiter<NextAwaiter>(s->waiters), shared_(std::move(s)) {}
        /// Movable until first awaited (WaitAwaiter asserts it): nothing was taken yet.
        NextAwaiter(NextAwaiter&& o) noexcept
            : detail::WaitAwaiter<NextAwaiter>(std::move(o)), shared_(std::move(o.shared_)) {}
        NextAwaiter(const NextAwaiter&) = delete;
        NextAwaiter& operator=(const NextAwaiter&) = delete;
        ~NextAwaiter() { this->leave(); }  // before outcome_ goes: a finishing task may fill it

        /// Lock held.
        bool try_now(detail::WakeList&) {
            if (!shared_->ready.empty()) {
                outcome_.emplace(shared_->pop_locked());
                return true;
            }
            return shared_->live == 0;  // empty set: nullopt
        }
        std::optional<value_type> await_resume() {
            this->finish_wait();
            if (!outcome_) return std::nullopt;
            return JoinSet::unwrap(std::move(*outcome_));
        }

    private:
        friend class JoinSet;
        std::shared_ptr<typename JoinSet::Shared> shared_;
        std::optional<typename JoinSet::Outcome> outcome_;  // filled under the lock, before the grant
    };

    /// `co_await set.join_next()`: the next finished task's result (see above).
    NextAwaiter join_next() { return NextAwaiter(checked()); }

    /// A finished task's result if one is waiting, else std::nullopt. Never suspends.
    std::optional<value_type> try_join_next() {
        Shared& s = *checked();
        std::optional<Outcome> o;
        {
            std::lock_guard guard(s.lock);
            if (s.ready.empty()) return std::nullopt;
            o.emplace(s.pop_locked());
        }
        return unwrap(std::move(*o));
    }

    /// Aborts every task still running (no-op for the finished ones).
    void abort_all() noexcept {
        if (!shared_) return;
        std::vector<detail::AbortState*> running;
        {
            std::lock_guard guard(shared_->lock);
            try {
                running.reserve(shared_->live);
            } catch (...) {
                // No memory for the list: abort under the lock instead (a member waiting on
                // this very set's join_next would then spin; acceptable when out of memory).
                for (Member* m = shared_->members; m != nullptr; m = m->next) m->abort.abort();
                return;
            }
            for (Member* m = shared_->members; m != nullptr; m = m->next) {
                detail::AbortState* a = m->state();
                a->retain();
                running.push_back(a);
            }
        }
        // Outside the lock: an abort runs the task's cancellations, which take other locks.
        for (detail::AbortState* a : running) {
            a->abort();
            a->release();
        }
    }

    /// Tasks running plus results not taken (a snapshot).
    std::size_t size() const noexcept {
        if (!shared_) return 0;
        std::lock_guard guard(shared_->lock);
        return shared_->live + shared_->ready.size();
    }
    /// size() == 0.
    bool empty() const noexcept { return size() == 0; }

private:
    static Task<void> run(std::shared_ptr<Shared> s, Task<T> task, Member* me) {
        Outcome o;
        try {
            if constexpr (std::is_void_v<T>) {
                co_await std::move(task);
                o.value.emplace();
            } else {
                o.value.emplace(co_await std::move(task));
            }
        } catch (...) {
            o.error = std::current_exception();
            o.aborted = me->abort.aborted();  // me stays linked (ours) until finish()
        }
        s->finish(me, std::move(o));
    }

    static value_type unwrap(Outcome&& o) {
        if (o.error) {
            if (o.aborted) throw TaskAborted("eddy::JoinSet::join_next: the task was aborted before it finished");
            std::rethrow_exception(o.error);
        }
        return std::move(*o.value);
    }

    const std::shared_ptr<Shared>& checked() const {
        if (!shared_) throw BrokenTask("eddy::JoinSet: the set was moved from");
        return shared_;
    }

    std::shared_ptr<Shared> shared_;
};

}  // namespace eddy
