// eddy/tasks/detail/await_trace.hpp: what a suspended task waits on, for Runtime::dump().
//
// Every `co_await` in a Task goes through the promise's await_transform, which wraps the
// awaiter in a TracedAwaiter and records the expression's site (an AwaitSite, from a default
// argument: the site of the co_await, not of this header). When the task really suspends,
// the wrapper records in the promise which awaiter it waits on (with a type-erased
// describer, AwaitVT) and when (a coarse clock). That is three stores per suspension and one
// per co_await, into the task's own frame: no allocation, no atomic RMW, no clock read (the
// coarse clock is a relaxed load of a word the reactor and waking workers refresh). The
// wrapper holds the awaiter itself when operator co_await makes one (nothing added), and a
// reference when the awaitable is its own awaiter (8 bytes beside that temporary).
//
// # The site: one pointer with GCC, three words with Clang 14
// With GCC (12 and later: `__builtin_source_location`) the site is a std::source_location,
// one pointer to a static constant the compiler makes per co_await (file, function, line,
// column): one store. Clang 14 has no such builtin; there the site is the file, function
// and line themselves (`__builtin_FILE()` and friends: three stores, two words more per
// frame). The promise layout so differs by compiler, which is safe only if a program cannot
// mix the two: <eddy/tasks/dump_config.hpp> records which the library was built with
// (EDDY_TASK_DUMP_SOURCE_LOCATION), and this header refuses a compiler that disagrees.
//
// The awaiter is found as co_await finds it, with one difference: a non-member operator
// co_await is looked up from here (eddy::detail) and by argument-dependent lookup, not from
// the co_await's own scope; define it in the awaitable's namespace.
//
// All of it exists only with the meson option task_dump (for what it costs, a few stores per
// suspension and 32 bytes per frame with GCC: docs/performance/deadlines-and-dumps.md).
//
// Reading the record is safe only while no thread runs the task: Runtime::dump() stops every
// worker between two polls (runtime/task_dump.cpp), so every frame it walks is suspended in
// the awaiter its record names (alive until the task resumes), not started, or finished.
// The record is not cleared when the task resumes (that would cost the wrapper a pointer in
// every co_await): a running frame's record is stale. So a task dumps through
// `co_await eddy::dump_tasks()`, which keeps it suspended while the dump runs, and
// Runtime::dump() refuses a worker thread.
//
// # Describing a wait
// An awaiter tells the dump what it waits on with a member
//     void dump_wait(eddy::detail::DumpWait& d) const;
// (text such as "read fd 7", the frames it runs as children, the task it joins, a deadline).
// Without one, the dump names the awaiter's type. The dump calls it only while the awaiting
// task is suspended in it: it may read what the awaiter set before it published the task,
// never what another thread changes (a result, a status).
#pragma once

#include <atomic>
#include <bit>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <string_view>
#include <type_traits>
#include <utility>
#if defined(__cpp_rtti) || defined(__GXX_RTTI)
#include <typeinfo>
#endif

#include <eddy/tasks/dump_config.hpp>

#if defined(__has_builtin)
#if __has_builtin(__builtin_source_location)
#define EDDY_DETAIL_HAS_SOURCE_LOCATION 1
#endif
#endif
#ifndef EDDY_DETAIL_HAS_SOURCE_LOCATION
#define EDDY_DETAIL_HAS_SOURCE_LOCATION 0
#endif
#if EDDY_TASK_DUMP && EDDY_DETAIL_HAS_SOURCE_LOCATION != EDDY_TASK_DUMP_SOURCE_LOCATION
#error \
    "eddy was configured with task_dump by a compiler whose await sites differ from this one's \
(__builtin_source_location): build the program with the compiler that built eddy"
#endif
#if EDDY_DETAIL_HAS_SOURCE_LOCATION
#include <source_location>
#endif

namespace eddy::detail {

struct FrameHeader;

/// The dump's side of one suspended co_await (implemented in runtime/task_dump.cpp).
class DumpWait {
public:
    /// Appends to the description ("read fd ", then number(7)).
    virtual void text(std::string_view s) = 0;
    virtual void number(std::int64_t n) = 0;
    /// Appends an address (a Mutex, a channel): "0x7f...".
    virtual void address(const void* p) = 0;
    /// A frame this wait runs and is waiting for (an awaited Task, a combinator's child, a
    /// group's member): listed under the task.
    virtual void child(std::coroutine_handle<> frame) = 0;
    /// A TaskGroup's member (a frame with a FrameHeader, which may carry a name).
    virtual void member(std::coroutine_handle<> frame) = 0;
    /// The spawned task this wait joins (named by its dump id when the dump sees it).
    virtual void join(const FrameHeader* task) = 0;
    /// When the wait ends by itself (a sleep, a timeout): shown relative to now.
    virtual void deadline(std::chrono::steady_clock::time_point t) = 0;

protected:
    ~DumpWait() = default;
};

/// How the dump reads one awaiter type. The three sentinel tables mark a task that is not
/// suspended in an awaiter (state != nullptr).
struct AwaitVT {
    void (*describe)(const void* awaiter, DumpWait& d);  // null: no dump_wait, use `type`
    const char* state;                                   // "not started", "running", "finished"
#if defined(__cpp_rtti) || defined(__GXX_RTTI)
    const std::type_info* type;
#else
    const void* type;
#endif
};

inline constexpr AwaitVT kNotStarted{nullptr, "not started", nullptr};
inline constexpr AwaitVT kRunning{nullptr, "running", nullptr};
inline constexpr AwaitVT kFinished{nullptr, "finished", nullptr};

template <class A>
concept DescribesWait = requires(const A& a, DumpWait& d) {
    a.dump_wait(d);
};

template <class A>
void describe_awaiter(const void* awaiter, DumpWait& d) {
    static_cast<const A*>(awaiter)->dump_wait(d);
}

template <class A>
constexpr auto describer_of() noexcept -> void (*)(const void*, DumpWait&) {
    if constexpr (DescribesWait<A>) {
        return &describe_awaiter<A>;
    } else {
        return nullptr;
    }
}

template <class A>
inline constexpr AwaitVT kAwaitVT {
    describer_of<A>(), nullptr,
#if defined(__cpp_rtti) || defined(__GXX_RTTI)
        &typeid(A)
#else
        nullptr
#endif
};

/// A coarse steady clock in milliseconds (wrapping at 2^32: only differences are read).
/// Refreshed by the reactor thread before it sleeps (at least every millisecond while a worker
/// runs), by a worker leaving park and by a dump; read (relaxed) at each suspension.
alignas(64) inline std::atomic<std::uint32_t> g_coarse_ms{0};  // its own line: read by every suspension

inline std::uint32_t coarse_ms_of(std::chrono::steady_clock::time_point t) noexcept {
    return static_cast<std::uint32_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count());
}

/// Refreshes g_coarse_ms from steady_clock nanoseconds (writes only when the millisecond
/// changed: the word is read by every suspending task and should stay in their caches).
inline void refresh_coarse_clock(std::int64_t steady_ns) noexcept {
    const auto ms = static_cast<std::uint32_t>(steady_ns / 1'000'000);
    // Relaxed both: a hint of the time, ordered with nothing.
    if (g_coarse_ms.load(std::memory_order_relaxed) != ms) g_coarse_ms.store(ms, std::memory_order_relaxed);
}
inline void refresh_coarse_clock(std::chrono::steady_clock::time_point now) noexcept {
    refresh_coarse_clock(std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count());
}

#if EDDY_DETAIL_HAS_SOURCE_LOCATION
/// Where a co_await is (see "The site" at the top of this file): one pointer to the
/// compiler's per-site constant, as `__builtin_source_location()` gives it. Passed to
/// await_transform as that pointer, not as a std::source_location: GCC keeps a class-type
/// argument of a co_await's await_transform in the frame (16 bytes), not a pointer.
class AwaitSite {
public:
    AwaitSite() noexcept = default;
    explicit AwaitSite(const void* builtin_location) noexcept : loc_(builtin_location) {}
    /// The file as the compiler was given it; nullptr before the first co_await.
    const char* file() const noexcept { return loc_ != nullptr ? location().file_name() : nullptr; }
    /// The function (the compiler's full signature); nullptr before the first co_await.
    const char* function() const noexcept { return loc_ != nullptr ? location().function_name() : nullptr; }
    std::uint32_t line() const noexcept { return loc_ != nullptr ? location().line() : 0; }

private:
    // std::source_location is that one pointer (std::source_location::current() is made from it).
    static_assert(sizeof(std::source_location) == sizeof(const void*));
    std::source_location location() const noexcept { return std::bit_cast<std::source_location>(loc_); }

    const void* loc_ = nullptr;
};
#else
/// Where a co_await is (see "The site" at the top of this file): the compiler builtins'
/// values, for compilers without __builtin_source_location (Clang 14).
class AwaitSite {
public:
    AwaitSite() noexcept = default;
    AwaitSite(const char* file, const char* function, std::uint32_t line) noexcept
        : file_(file), function_(function), line_(line) {}
    /// The file as the compiler was given it; nullptr before the first co_await.
    const char* file() const noexcept { return file_; }
    /// The function (its name); nullptr before the first co_await.
    const char* function() const noexcept { return function_; }
    std::uint32_t line() const noexcept { return line_; }

private:
    const char* file_ = nullptr;
    const char* function_ = nullptr;
    std::uint32_t line_ = 0;
};
#endif

/// The record in every promise (see the top of this file). Written by the thread running
/// the task; read by Runtime::dump() while that thread is paused.
struct AwaitTrace {
    AwaitSite site;                    // the last co_await's (await_transform)
    const AwaitVT* vt = &kNotStarted;  // what it waits on, or a sentinel
    const void* awaiter = nullptr;     // the awaiter (in the frame), while vt is not a sentinel
    std::uint32_t since_ms = 0;        // g_coarse_ms at the suspension
};

/// The awaiter a co_await of `a` uses (its operator co_await's, or `a` itself).
template <class A>
decltype(auto) awaiter_of(A&& a) {
    if constexpr (requires { std::forward<A>(a).operator co_await(); }) {
        return std::forward<A>(a).operator co_await();
    } else if constexpr (requires { operator co_await(std::forward<A>(a)); }) {
        return operator co_await(std::forward<A>(a));
    } else {
        return static_cast<A&>(a);  // the awaitable is its own awaiter: an lvalue, as co_await uses it
    }
}

/// Wraps the awaiter of one co_await (see the top of this file). `Inner` is the awaiter's
/// type, or an lvalue reference to the awaitable when it is its own awaiter (it lives until
/// the end of the co_await's full expression, as this wrapper does). No state of its own:
/// the record is in the promise, reached through the handle.
template <class Inner>
class TracedAwaiter {
public:
    template <class A>
    // NOLINTNEXTLINE(bugprone-forwarding-reference-overload): never copied or moved, made in place
    explicit TracedAwaiter(A&& a) : inner_(awaiter_of(std::forward<A>(a))) {}
    TracedAwaiter(const TracedAwaiter&) = delete;
    TracedAwaiter& operator=(const TracedAwaiter&) = delete;

    decltype(auto) await_ready() { return inner().await_ready(); }

    /// P is an eddy promise (only PromiseBase's await_transform makes this wrapper).
    template <class P>
    decltype(auto) await_suspend(std::coroutine_handle<P> h) {
        // Before the inner await_suspend publishes the frame: after it, another thread may
        // resume (and destroy) it.
        AwaitTrace& trace = h.promise().trace_record();
        trace.awaiter = &inner();
        trace.vt = &kAwaitVT<std::remove_cvref_t<Inner>>;
        trace.since_ms = g_coarse_ms.load(std::memory_order_relaxed);
        // If it throws (or returns false), the frame runs on with a stale record until it
        // suspends again or finishes; a dump never sees it meanwhile: a paused worker is
        // between two polls, and a task dumping from its own poll is suspended in dump_tasks.
        return inner().await_suspend(h);
    }

    decltype(auto) await_resume() { return inner().await_resume(); }

private:
    std::remove_reference_t<Inner>& inner() noexcept { return inner_; }

    Inner inner_;
};

template <class A>
TracedAwaiter(A&&) -> TracedAwaiter<decltype(awaiter_of(std::declval<A&&>()))>;

}  // namespace eddy::detail
