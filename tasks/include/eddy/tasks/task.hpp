//! eddy/tasks/task.hpp: Task<T>, the coroutine type every eddy computation is written as.
//!
//! Lifecycle. A Task is an allocated coroutine that has not started: calling a `Task<T>`
//! function runs nothing. It starts when it is awaited (`co_await task`), spawned
//! (`eddy::spawn`, `Runtime::spawn`, `Runtime::block_on`) or passed to `when_all`.
//!
//! Where it runs. An awaited task runs on the thread of its awaiter, and the awaiter resumes on
//! the thread that finished the task: awaiting and finishing are symmetric transfers, never
//! nested calls, so a chain of a million synchronously completing awaits uses constant stack
//! (see README for the g++ debug-build caveat).
//!
//! Results. `co_await std::move(task)` (or on an lvalue: `co_await task`) gives the `co_return`
//! value, or rethrows the exception that escaped the task. Awaiting *consumes* the task: its
//! frame is destroyed once the result is taken, and the Task is left empty.
//!
//! Ownership. A Task is move-only and owns its frame: destroying a Task that never ran (or
//! finished) destroys the frame. `Task<T&>` returns a reference; the referent must outlive the
//! awaiter's use of it. `Task<void>` returns nothing.
//!
//! Cancellation. An awaited task runs under its awaiter's cancellation (its stop state):
//! cancelling a task (when_any, with_timeout, TaskGroup, or a token of your own through
//! with_stop_token) cancels whatever it and the tasks it awaits are suspended on. See
//! eddy/tasks/cancellation.hpp.
//!
//! Misuse. Awaiting or spawning an empty Task (default-constructed, moved-from, or already
//! awaited) throws eddy::BrokenTask at the co_await (or spawn) expression.
//! @file
#pragma once

#include <coroutine>
#include <stop_token>
#include <type_traits>
#include <utility>

#include <eddy/tasks/detail/promise.hpp>
#include <eddy/tasks/errors.hpp>

namespace eddy {

/// A lazy coroutine giving T: it runs when awaited, spawned or passed to a combinator, and
/// is awaited once (see the file's prologue).
template <class T>
class [[nodiscard]] Task {
public:
    /// The coroutine's promise (what makes a `Task<T>` function a coroutine).
    using promise_type = detail::Promise<T>;
    /// What awaiting the task gives.
    using value_type = T;

    /// An empty task: awaiting or spawning it throws eddy::BrokenTask.
    Task() noexcept = default;
    /// Takes the other's coroutine; the other is left empty.
    Task(Task&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
    /// Destroys this task's coroutine (if it never ran), then takes the other's.
    Task& operator=(Task&& other) noexcept {
        if (this != &other) {
            reset();
            handle_ = std::exchange(other.handle_, {});
        }
        return *this;
    }
    Task(const Task&) = delete;
    Task& operator=(const Task&) = delete;
    ~Task() { reset(); }

    /// True while the task holds a coroutine (not moved-from, not yet awaited).
    bool valid() const noexcept { return static_cast<bool>(handle_); }
    /// valid().
    explicit operator bool() const noexcept { return valid(); }

    /// What `co_await task` uses: starts the task by symmetric transfer, gives its result.
    class Awaiter {
    public:
        /// Throws eddy::BrokenTask for an empty task.
        explicit Awaiter(Task& task) : task_(task) {
            if (!task_.handle_)
                throw BrokenTask(
                    "eddy: awaiting an empty Task (moved-from, "
                    "default-constructed or already awaited)");
        }
        /// Awaits under a given cancellation instead of the awaiter's (shield, with_stop_token).
        Awaiter(Task& task, const detail::TaskCancellation* cancellation) : Awaiter(task) {
            fixed_ = cancellation;
            inherit_ = false;
        }
        bool await_ready() const noexcept { return false; }
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> awaiter) noexcept {
            auto& p = task_.handle_.promise();
            p.set_continuation(awaiter);
            // The child runs under its awaiter's cancellation: cancelling a task cancels
            // whatever it awaits, however deep.
            p.set_cancellation(inherit_ ? detail::cancellation_scope_of(awaiter) : fixed_);
            return task_.handle_;  // symmetric transfer: start the task
        }
        /// Task dumps (eddy/tasks/detail/await_trace.hpp): the awaited task is a child.
        void dump_wait(detail::DumpWait& d) const {
            d.text("await");
            d.child(task_.handle_);
        }
        T await_resume() {
            // The frame is destroyed after the result is moved out (or the exception rethrown).
            struct Consume {
                Task& t;
                ~Consume() { t.reset(); }
            } consume{task_};
            return task_.handle_.promise().take();
        }

    private:
        Task& task_;
        const detail::TaskCancellation* fixed_ = nullptr;
        bool inherit_ = true;
    };

    /// `co_await task`: runs it, gives its value (or rethrows), and leaves it empty.
    Awaiter operator co_await() & { return Awaiter(*this); }
    /// `co_await std::move(task)` or on a temporary: the same.
    Awaiter operator co_await() && { return Awaiter(*this); }

private:
    friend class detail::Promise<T>;
    friend struct detail::TaskAccess;
    explicit Task(std::coroutine_handle<promise_type> h) noexcept : handle_(h) {}

    void reset() noexcept {
        if (handle_) std::exchange(handle_, {}).destroy();
    }

    std::coroutine_handle<promise_type> handle_;
};

namespace detail {

template <class A>
inline constexpr bool is_task_v = false;
template <class T>
inline constexpr bool is_task_v<Task<T>> = true;

template <class T>
Task<T> Promise<T>::get_return_object() noexcept {
    return Task<T>(std::coroutine_handle<Promise<T>>::from_promise(*this));
}
template <class T>
Task<T&> Promise<T&>::get_return_object() noexcept {
    return Task<T&>(std::coroutine_handle<Promise<T&>>::from_promise(*this));
}
inline Task<void> Promise<void>::get_return_object() noexcept {
    return Task<void>(std::coroutine_handle<Promise<void>>::from_promise(*this));
}
}  // namespace detail

}  // namespace eddy
