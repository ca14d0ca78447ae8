//! eddy/tasks/awaitable.hpp: what eddy's combinators accept, and how they hold it.
//!
//!     co_await eddy::with_timeout(stream.read(buf), 1s);           // an operation
//!     co_await eddy::when_any(channel.receive(), eddy::sleep(1s)); // two of them
//!     co_await eddy::with_timeout(fetch(url), 1s);                 // a Task
//!
//! # The concept
//! An eddy::Awaitable is anything a Task can `co_await` as an rvalue: a Task, an eddy
//! operation (what `stream.read(buf)`, `eddy::sleep(d)`, `mutex.lock()` return), a combinator's
//! result (eddy::Timeout, eddy::WhenAll), or a type of your own with await_ready /
//! await_suspend / await_resume or a member `operator co_await`. (A free operator co_await is
//! not looked for.) eddy::await_result_t<A> is what awaiting it gives; an rvalue reference
//! result is taken as a value.
//!
//! # Who owns the operation
//! Every combinator takes the awaitable as an rvalue (a temporary, or std::move(op)) and
//! holds it until it has finished with it:
//!   * a movable awaitable (every Task and every eddy operation: they move until first
//!     awaited, like a Rust future before its first poll) is moved into the combinator, which
//!     destroys it before it lets go of the cancellation the operation ran under;
//!   * a non-movable awaitable of your own is borrowed: it must outlive the combinator, which
//!     it does when the combinator is awaited in the expression that made both
//!     (`co_await eddy::with_timeout(my_op(), 1s)`), not stored in a variable first.
//! What an operation points into (the buffer of a read, the stream, the channel) stays the
//! caller's, as with any asynchronous call: it must outlive the co_await. So:
//!   * combinators that await in place (with_timeout, timeout_or, with_deadline, when_all,
//!     when_any, when_any_all_results, shield, with_stop_token, block_on) take any awaitable;
//!   * those that run it after the caller moves on (spawn, spawn_abortable, Runtime::spawn,
//!     TaskGroup::spawn, JoinSet::spawn) take only what owns its operands: a Task, or a
//!     movable awaitable that does not borrow (eddy::sleep does not; every operation on a
//!     stream, a file, a channel or a lock does, and says so with a nested
//!     `borrows_operands` type). They refuse the others at compile time with a message that
//!     says so: spawn a Task that owns the stream and the buffer instead.
//! @file
#pragma once

#include <concepts>
#include <coroutine>
#include <functional>
#include <new>
#include <optional>
#include <ranges>
#include <type_traits>
#include <utility>
#include <vector>

#include <eddy/tasks/detail/await_trace.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy {

namespace detail {

template <class A>
concept MemberCoAwait = requires(A&& a) {
    static_cast<A&&>(a).operator co_await();
};

template <class A>
concept AwaiterMembers = requires(A& a) {
    { a.await_ready() } -> std::convertible_to<bool>;
    a.await_resume();
};

/// The awaiter of an rvalue A: what its operator co_await returns, or A itself.
template <class A>
struct AwaiterType {
    using type = std::remove_cvref_t<A>;
};
template <MemberCoAwait A>
struct AwaiterType<A> {
    using type = std::remove_cvref_t<decltype(std::declval<std::remove_cvref_t<A>&&>().operator co_await())>;
};

template <class R>
struct ResultOf {
    using type = R;
};
template <class R>
struct ResultOf<R&&> {
    using type = R;
};

}  // namespace detail

/// Anything a Task can co_await as an rvalue (see above).
template <class A>
concept Awaitable = detail::AwaiterMembers<typename detail::AwaiterType<A>::type>;

/// What `co_await` on an rvalue A gives (an rvalue reference result as a value).
template <Awaitable A>
using await_result_t =
    typename detail::ResultOf<decltype(std::declval<typename detail::AwaiterType<A>::type&>().await_resume())>::type;

/// True for an awaitable that points into what its caller owns (a buffer, a stream, a
/// channel): it declares a nested type `borrows_operands`. Such an awaitable is awaited in
/// place, never spawned.
template <class A>
inline constexpr bool borrows_operands_v = requires {
    typename std::remove_cvref_t<A>::borrows_operands;
};

namespace detail {

/// What a non-throwing timeout gives for a result of type T: std::optional<T>;
/// std::optional<std::reference_wrapper<U>> for U&; bool (finished in time) for void.
template <class T>
struct Maybe {
    using type = std::optional<T>;
};
template <class T>
struct Maybe<T&> {
    using type = std::optional<std::reference_wrapper<T>>;
};
template <>
struct Maybe<void> {
    using type = bool;
};
template <class T>
using maybe_t = typename Maybe<T>::type;

/// An awaitable that a combinator can move in and keep (see "Who owns the operation").
template <class A>
inline constexpr bool ownable_v = std::is_move_constructible_v<std::remove_cvref_t<A>>;

/// What a combinator holds for an awaitable passed as A&&: the object (moved in) when it can
/// move, else a reference to it.
template <class A>
using held_t = std::conditional_t<ownable_v<A>, std::remove_cvref_t<A>, std::remove_reference_t<A>&>;

/// An awaitable held as H (moved in when H is a value, borrowed when a reference) and its
/// awaiter, built in place on first use when the awaitable has an operator co_await (a Task),
/// else the awaitable itself.
template <class H>
class AwaiterSlot {
    using A = std::remove_reference_t<H>;
    static constexpr bool kOwned = !std::is_reference_v<H>;

public:
    using Awaiter = typename AwaiterType<A>::type;

    explicit AwaiterSlot(A& a) noexcept(!kOwned || std::is_nothrow_move_constructible_v<A>) {
        if constexpr (kOwned) {
            ::new (static_cast<void*>(&own_.v)) A(std::move(a));
            alive_ = true;
        } else {
            ptr_ = &a;
        }
    }
    /// Before first use only (as the awaitables themselves).
    AwaiterSlot(AwaiterSlot&& o) noexcept(!kOwned || std::is_nothrow_move_constructible_v<A>)
        : AwaiterSlot(o.awaitable()) {}
    AwaiterSlot& operator=(AwaiterSlot&&) = delete;
    ~AwaiterSlot() { reset(); }

    A& awaitable() noexcept {
        if constexpr (kOwned) return own_.v;
        else return *ptr_;
    }
    const A& awaitable() const noexcept {
        if constexpr (kOwned) return own_.v;
        else return *ptr_;
    }

    /// The awaiter, made on first use.
    Awaiter& get() {
        if constexpr (MemberCoAwait<A>) {
            if (!made_) {
                ::new (static_cast<void*>(&w_.v)) Awaiter(std::move(awaitable()).operator co_await());
                made_ = true;
            }
            return w_.v;
        } else {
            return awaitable();
        }
    }
    const Awaiter* peek() const noexcept {
        if constexpr (MemberCoAwait<A>) return made_ ? &w_.v : nullptr;
        else return &awaitable();
    }

    /// Ends the awaiter's life and the owned awaitable's (a borrowed one is its owner's),
    /// so that whatever they registered is gone before the caller lets go of it. Idempotent.
    void reset() noexcept {
        if constexpr (MemberCoAwait<A>) {
            if (made_) {
                w_.v.~Awaiter();
                made_ = false;
            }
        }
        if constexpr (kOwned) {
            if (alive_) {
                own_.v.~A();
                alive_ = false;
            }
        }
    }

private:
    struct Empty {};
    template <class V>
    union Storage {
        Storage() noexcept {}
        ~Storage() {}
        V v;
    };
    Storage<std::conditional_t<kOwned, A, Empty>> own_;
    Storage<std::conditional_t<MemberCoAwait<A>, Awaiter, Empty>> w_;
    A* ptr_ = nullptr;  // borrowed
    bool alive_ = false;
    bool made_ = false;
};

/// Calls `w.await_suspend(h)` whatever it returns, as the coroutine to run next: `h` itself
/// when the awaiter decided not to suspend.
template <class W, class P>
std::coroutine_handle<> suspend_on(W& w, std::coroutine_handle<P> h) {
    using R = decltype(w.await_suspend(h));
    if constexpr (std::is_void_v<R>) {
        w.await_suspend(h);
        return std::noop_coroutine();
    } else if constexpr (std::is_same_v<R, bool>) {
        return w.await_suspend(h) ? std::coroutine_handle<>(std::noop_coroutine()) : std::coroutine_handle<>(h);
    } else {
        return w.await_suspend(h);
    }
}

/// Awaits the awaiter `w` by reference. (g++ 12 copies an awaiter named by an xvalue,
/// `co_await std::move(op)`, which a non-copyable operation refuses; a prvalue of this is
/// what the frames below await instead.)
template <class W>
struct AwaitRef {
    W& w;
    bool await_ready() { return w.await_ready(); }
    template <class P>
    auto await_suspend(std::coroutine_handle<P> h) {
        return w.await_suspend(h);
    }
    decltype(auto) await_resume() { return w.await_resume(); }
    void dump_wait(DumpWait& d) const requires DescribesWait<W> { w.dump_wait(d); }
};

/// The frames as_task makes: the awaitable held as H (a value or a reference), awaited once.
/// An owned one moves from the parameter into a local: a parameter lives until the frame is
/// destroyed, after its parent may have let go of the cancellation the operation registered
/// on, while a local is gone when the body ends.
template <class R, class H>
Task<R> await_held(H a) {
    AwaiterSlot<H> slot(a);
    using W = typename AwaiterSlot<H>::Awaiter;
    if constexpr (std::is_void_v<R>) {
        co_await AwaitRef<W>{slot.get()};
    } else {
        co_return co_await AwaitRef<W>{slot.get()};
    }
}

/// `a` as a Task (one coroutine frame, none for a Task): into_task() where the awaitable
/// offers one, else a frame that awaits it, owning it when it can move.
template <class A>
auto as_task(A&& a) {
    using T = std::remove_cvref_t<A>;
    if constexpr (is_task_v<T>) {
        return T(std::forward<A>(a));
    } else if constexpr (requires { std::forward<A>(a).into_task(); }) {
        return std::forward<A>(a).into_task();
    } else if constexpr (ownable_v<A>) {
        return await_held<await_result_t<A>, T>(T(std::forward<A>(a)));
    } else {
        return await_held<await_result_t<A>, T&>(a);
    }
}

/// An awaitable that is not a Task (the combinators' second overload: the first takes Tasks).
template <class A>
concept NonTaskAwaitable = Awaitable<A> && !is_task_v<std::remove_cvref_t<A>>;

/// A base that declares `borrows_operands` when `Borrows` is true: a combinator's result
/// borrows what the operation it holds borrows.
template <bool Borrows>
struct BorrowsIf {};
template <>
struct BorrowsIf<true> {
    using borrows_operands = void;
};
/// For a combinator holding an awaitable as H: borrowing when H is a reference (a
/// non-movable awaitable) or the awaitable borrows.
template <class H>
using BorrowsLike = BorrowsIf<std::is_reference_v<H> || borrows_operands_v<H>>;

/// `a` as a Task for a combinator that awaits it in place (when_all, shield, block_on, ...).
template <class A>
auto in_place_task(A&& a) {
    static_assert(std::is_rvalue_reference_v<A&&>,
                  "eddy's combinators take the awaitable over: pass a temporary or std::move(op)");
    return as_task(std::forward<A>(a));
}

/// `a` as a Task for one that runs it after the caller has moved on (eddy::spawn,
/// Runtime::spawn, TaskGroup::spawn, JoinSet::spawn): refused at compile time unless it can
/// own everything `a` uses.
template <class A>
auto detached_task(A&& a) {
    static_assert(std::is_rvalue_reference_v<A&&>,
                  "spawning takes the awaitable over: pass a temporary or std::move(op)");
    static_assert(ownable_v<A>,
                  "spawning runs the awaitable after the caller has moved on, so it must own it, "
                  "and this awaitable cannot be moved: await it in place, or spawn a Task that "
                  "awaits it");
    static_assert(!borrows_operands_v<A>,
                  "spawning runs the awaitable after the caller has moved on, and this operation "
                  "borrows from the caller (a buffer, a stream, a channel or a lock it points "
                  "into): await it in place (with_timeout, when_any, when_all are safe), or spawn "
                  "a Task that owns what the operation uses");
    return as_task(std::forward<A>(a));
}

template <class R>
inline constexpr bool is_task_vector_v = false;
template <class T>
inline constexpr bool is_task_vector_v<std::vector<Task<T>>> = true;

/// A range of awaitables other than a std::vector of Tasks (which the combinators take as
/// it is): any input range whose elements can be awaited, e.g. a std::vector<JoinHandle<T>>
/// or a std::list<Task<T>>.
template <class R>
concept AwaitableRange = std::ranges::input_range<R> && Awaitable<std::ranges::range_value_t<R>> &&
    !is_task_vector_v<std::remove_cvref_t<R>>;

/// The range's elements as Tasks (moved out of it: pass the range as an rvalue).
template <class R>
auto tasks_of(R&& r) {
    static_assert(std::is_rvalue_reference_v<R&&>,
                  "eddy's combinators take the awaitables over: pass the range with std::move");
    using E = std::ranges::range_value_t<R>;
    std::vector<Task<await_result_t<E>>> tasks;
    if constexpr (std::ranges::sized_range<R>) tasks.reserve(std::ranges::size(r));
    for (auto&& e : r) tasks.push_back(as_task(std::move(e)));
    return tasks;
}

}  // namespace detail

}  // namespace eddy
