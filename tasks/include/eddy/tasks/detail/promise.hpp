// eddy/tasks/detail/promise.hpp: Task<T>'s promise: result storage and completion routing.
//
// A frame finishes in one of four ways, chosen by whoever starts it:
//   awaited     `co_await task`: final suspend transfers to `continuation` (symmetric
//               transfer, so a chain of synchronous completions never grows the stack);
//   spawned     the runtime set `finish` to its root-task protocol (join handle, registry);
//   when_all, when_any, with_timeout
//               `finish` counts the child down and resumes the parent after the last one;
//   TaskGroup   `finish` records a failure, destroys the member's frame and resumes the
//               group's awaiter after the last member.
// `finish` runs inside final_suspend's await_suspend: the frame is suspended, so it may
// destroy the frame or hand it to another thread, and returns the coroutine to run next.
#pragma once

#include <atomic>
#include <cassert>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include <eddy/tasks/detail/await_trace.hpp>
#include <eddy/tasks/detail/frame_header.hpp>
#include <eddy/tasks/detail/task_cancellation.hpp>

namespace eddy::detail {

class PromiseBase;

/// Completion hook: `ctx` is the hook's own state, `self` the finished frame.
using FinishFn = std::coroutine_handle<> (*)(void* ctx, PromiseBase& p, std::coroutine_handle<> self) noexcept;

/// A completion hook and its context, held by whoever finishes frames this way (a scheduler,
/// a combinator's state, a TaskGroup), which outlives every frame it finishes: a frame keeps
/// one pointer to it.
struct FinishHook {
    FinishFn fn;
    void* ctx;
    /// A combinator's: the eddy task awaiting it (its frame), so that the slow-poll report
    /// can find the task a child runs for; nullptr for the others, or when the awaiter is
    /// another kind of coroutine.
    void* parent = nullptr;
};

class PromiseBase {
public:
    static void* operator new(std::size_t n) { return allocate_frame(n); }
    static void operator delete(void* frame, std::size_t) noexcept { deallocate_frame(frame); }

    std::suspend_always initial_suspend() const noexcept { return {}; }

    struct FinalAwaiter {
        bool await_ready() const noexcept { return false; }
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> self) const noexcept {
            PromiseBase& p = self.promise();
#if EDDY_TASK_DUMP
            p.trace_.vt = &kFinished;  // a combinator's finished child stays until its parent takes it
#endif
            const std::uintptr_t link = p.link_;
            if ((link & kHookBit) != 0) {
                const auto* hook = reinterpret_cast<const FinishHook*>(link & ~kHookBit);
                return hook->fn(hook->ctx, p, self);
            }
            return link != 0 ? std::coroutine_handle<>::from_address(reinterpret_cast<void*>(link & ~kPromiseBit))
                             : std::noop_coroutine();
        }
        [[noreturn]] void await_resume() const noexcept { std::terminate(); }
    };
    FinalAwaiter final_suspend() const noexcept { return {}; }

    void unhandled_exception() noexcept { exception_ = std::current_exception(); }

#if EDDY_TASK_DUMP
    /// Every co_await: records its site, and wraps the awaiter so that a suspension records
    /// what it waits on (await_trace.hpp). The builtins in the default arguments name the
    /// co_await expression (GCC and Clang evaluate them at the implicit call). Scalars only:
    /// GCC keeps a class-type argument in the frame.
#if EDDY_DETAIL_HAS_SOURCE_LOCATION
    template <class A>
    auto await_transform(A&& a, const void* site = __builtin_source_location()) {
        trace_.site = AwaitSite(site);
#else
    template <class A>
    auto await_transform(A&& a, const char* file = __builtin_FILE(), const char* function = __builtin_FUNCTION(),
                         unsigned line = __builtin_LINE()) {
        trace_.site = AwaitSite(file, function, line);
#endif
        return TracedAwaiter(std::forward<A>(a));
    }
    /// The wrapper's and Runtime::dump()'s (while the task's worker is paused) access.
    AwaitTrace& trace_record() noexcept { return trace_; }
#endif

    template <class P>
    void set_continuation(std::coroutine_handle<P> c) noexcept {
        link_ = reinterpret_cast<std::uintptr_t>(c.address());
        assert((link_ & (kHookBit | kPromiseBit)) == 0 && "a coroutine frame is at least 4-aligned");
        if constexpr (std::is_base_of_v<PromiseBase, P>) link_ |= kPromiseBit;
    }
    /// `hook` outlives the frame (see FinishHook).
    void set_finish(const FinishHook* hook) noexcept { link_ = reinterpret_cast<std::uintptr_t>(hook) | kHookBit; }
    const std::exception_ptr& exception() const noexcept { return exception_; }
    /// Whether a FinishHook ends the task (a spawned root task or a group member): then its
    /// frame has a FrameHeader in use (an awaited frame may have none: allocation elision).
    bool finished_by_hook() const noexcept { return (link_ & kHookBit) != 0; }
    /// The hook that ends the task, or nullptr when it is awaited.
    const FinishHook* finish_hook() const noexcept {
        return finished_by_hook() ? reinterpret_cast<const FinishHook*>(link_ & ~kHookBit) : nullptr;
    }
    /// The eddy task awaiting this one with `co_await` (its frame), or nullptr: finished by a
    /// hook, not started, or awaited by another kind of coroutine.
    void* awaiting_frame() const noexcept {
        return (link_ & kPromiseBit) != 0 ? reinterpret_cast<void*>(link_ & ~kPromiseBit) : nullptr;
    }

    /// The cancellation this task runs under: its awaiter's (inherited at `co_await`), a
    /// combinator's (when_all, when_any, with_timeout, TaskGroup), or nullptr (spawned root
    /// tasks, shield). It lives in an ancestor frame that outlives this task.
    const TaskCancellation* cancellation_scope() const noexcept { return stop_; }
    /// Its stop state, to register a cancellation on (nullptr: uncancellable); linked now if
    /// its scope links on demand.
    StopState* cancellation() const noexcept { return stop_ != nullptr ? stop_->get() : nullptr; }
    void set_cancellation(const TaskCancellation* c) noexcept { stop_ = c; }

protected:
    void rethrow_if_failed() const {
        if (exception_) std::rethrow_exception(exception_);
    }

private:
    // What runs after final suspend: a task is either awaited (`link_` is its continuation's
    // address, with kPromiseBit set when it is an eddy task; 0: nothing, a noop) or finished
    // by a hook (`link_` is the FinishHook's address with kHookBit set), never both, so one
    // word serves both. Every frame carries these
    // fields: 8 bytes more per frame once crossed glibc's 128-byte fastbin limit for small
    // tasks (it halved spawn_many with 2 workers), and 8 bytes less is what brings a task
    // waiting on an Event to the frame pool's 208-byte class (benchmarks/task_memory).
    static constexpr std::uintptr_t kHookBit = 1;
    static constexpr std::uintptr_t kPromiseBit = 2;
    std::uintptr_t link_ = 0;
    std::exception_ptr exception_;
    const TaskCancellation* stop_ = nullptr;
#if EDDY_TASK_DUMP
    AwaitTrace trace_;  // four words with GCC: docs/performance/deadlines-and-dumps.md
#endif
};
// Every frame pays for these bytes (and the header's): see the comment on link_ above.
// Measure spawn_many with 2 workers before letting this grow.
static_assert(sizeof(PromiseBase) <= 3 * sizeof(void*) + (EDDY_TASK_DUMP ? sizeof(AwaitTrace) : 0),
              "PromiseBase grew: every Task frame pays for it");

/// The stop state of the coroutine behind `h` if it is a cancellable eddy Task, else nullptr.
/// Awaiters use it from a templated await_suspend to learn whom they suspend.
template <class P>
StopState* cancellation_of(std::coroutine_handle<P> h) noexcept {
    if constexpr (std::is_base_of_v<PromiseBase, P>) {
        return h.promise().cancellation();
    } else {
        return nullptr;
    }
}

/// The same, with its TaskCancellation (to share the token, or to run a child under it).
template <class P>
const TaskCancellation* cancellation_scope_of(std::coroutine_handle<P> h) noexcept {
    if constexpr (std::is_base_of_v<PromiseBase, P>) {
        return h.promise().cancellation_scope();
    } else {
        return nullptr;
    }
}

/// The frame of the coroutine behind `h` if it is an eddy Task, else nullptr (FinishHook::parent).
template <class P>
void* eddy_frame_of(std::coroutine_handle<P> h) noexcept {
    if constexpr (std::is_base_of_v<PromiseBase, P>) {
        return h.address();
    } else {
        return nullptr;
    }
}

/// True when the coroutine behind `h` runs under eddy::coop::unconstrained.
template <class P>
bool unconstrained_of(std::coroutine_handle<P> h) noexcept {
    const TaskCancellation* c = cancellation_scope_of(h);
    return c != nullptr && c->unconstrained;
}

inline bool stop_requested(const StopState* s) noexcept { return s != nullptr && s->stop_requested(); }

template <class T>
class Promise;

}  // namespace eddy::detail

namespace eddy {
/// A lazy coroutine giving T (eddy/tasks/task.hpp).
template <class T = void>
class [[nodiscard]] Task;
}  // namespace eddy

namespace eddy::detail {

template <class T>
class Promise final : public PromiseBase {
    // A frame follows a 48-byte header from a 16-byte-aligned allocation, and task dumps find
    // PromiseBase at the offset a 16-byte-aligned promise has.
    static_assert(alignof(T) <= 16, "eddy::Task<T>: T aligned to more than 16 bytes is not supported");

public:
    Task<T> get_return_object() noexcept;

    template <class U = T>
    requires std::is_convertible_v<U&&, T>
    void return_value(U&& v) noexcept(std::is_nothrow_constructible_v<T, U&&>) { value_.emplace(std::forward<U>(v)); }

    /// Moves the result out, or rethrows the task's exception.
    T take() {
        rethrow_if_failed();
        return std::move(*value_);
    }

private:
    std::optional<T> value_;
};

template <class T>
class Promise<T&> final : public PromiseBase {
public:
    Task<T&> get_return_object() noexcept;
    void return_value(T& v) noexcept { value_ = std::addressof(v); }
    T& take() {
        rethrow_if_failed();
        return *value_;
    }

private:
    T* value_ = nullptr;
};

template <>
class Promise<void> final : public PromiseBase {
public:
    Task<void> get_return_object() noexcept;
    void return_void() noexcept {}
    void take() { rethrow_if_failed(); }
};

/// The runtime's access to a Task's coroutine (spawn, when_all). Not for users.
struct TaskAccess {
    template <class T>
    static std::coroutine_handle<Promise<T>> release(Task<T>& t) noexcept {
        return std::exchange(t.handle_, {});
    }
    template <class T>
    static std::coroutine_handle<Promise<T>> get(const Task<T>& t) noexcept {
        return t.handle_;
    }
};

}  // namespace eddy::detail
