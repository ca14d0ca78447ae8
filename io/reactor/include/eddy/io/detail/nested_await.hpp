// eddy/io/detail/nested_await.hpp: awaiting a stream's operation from inside another
// awaiter, without a coroutine frame. Not for users: no stability promise.
//
// BufReader::fill_buf and BufWriter::flush are awaiters, not Tasks: on the echo benchmark a
// frame per call cost about a fifth of the round trips at 1 worker. When they must do I/O they
// make the stream's own awaitable (TcpStream::read gives a SocketAwaiter, pinned once awaited,
// so it is built in place with placement new from the prvalue: no copy, no move) and hand
// their coroutine to it. For a stream whose operations are Tasks (tls::Stream, a BufReader
// under a FrameReader) the Task's awaiter is built in place the same way.
//
// Lifetimes: the nested awaitable lives inside the outer awaiter, which lives in the awaiting
// coroutine's frame until the co_await expression ends; await_suspend returns what the
// nested one decided and touches nothing after handing the coroutine over.
#pragma once

#include <cassert>
#include <coroutine>
#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

#include <eddy/tasks/awaitable.hpp>

namespace eddy::detail {

template <class A>
concept HasMemberCoAwait = requires(A& a) {
    a.operator co_await();
};

/// Whatever `co_await a` on an lvalue `a` of type A uses as its awaiter.
template <class A>
struct AwaiterOf {
    using type = A&;
};
template <HasMemberCoAwait A>
struct AwaiterOf<A> {
    using type = decltype(std::declval<A&>().operator co_await());
};

/// An awaitable of type A made in place, and its awaiter.
template <class A>
class NestedAwait {
public:
    NestedAwait() noexcept {}
    /// Movable while nothing is made (before the outer awaiter's await_suspend), so that the
    /// outer awaiter moves until first awaited; the new one is empty too.
    NestedAwait(NestedAwait&& o) noexcept {
        assert(!o.made_ && "eddy: an awaiter moved after it was awaited");
        (void)o;
    }
    NestedAwait(const NestedAwait&) = delete;
    NestedAwait& operator=(const NestedAwait&) = delete;
    ~NestedAwait() { reset(); }

    /// Makes the awaitable from `make()` (a prvalue of type A).
    template <class Make>
    void make(Make&& make) {
        reset();
        ::new (static_cast<void*>(&a_.v)) A(std::forward<Make>(make)());
        made_ = true;
        if constexpr (HasMemberCoAwait<A>) {
            ::new (static_cast<void*>(&w_.v)) Awaiter(a_.v.operator co_await());
        }
    }

    /// Suspends `h` on the awaitable (after its await_ready); gives the coroutine to run next:
    /// `h` itself when the awaitable did not suspend.
    template <class P>
    std::coroutine_handle<> suspend(std::coroutine_handle<P> h) {
        auto& w = awaiter();
        if (w.await_ready()) return h;
        return suspend_on(w, h);
    }

    decltype(auto) resume() { return awaiter().await_resume(); }

    void reset() noexcept {
        if (!made_) return;
        if constexpr (HasMemberCoAwait<A>) w_.v.~Awaiter();
        a_.v.~A();
        made_ = false;
    }

private:
    using Awaiter = std::remove_reference_t<typename AwaiterOf<A>::type>;
    Awaiter& awaiter() noexcept {
        if constexpr (HasMemberCoAwait<A>) return w_.v;
        else return a_.v;
    }
    struct Empty {};
    using Held = std::conditional_t<HasMemberCoAwait<A>, Awaiter, Empty>;  // a Task's awaiter
    union AStorage {
        AStorage() noexcept {}
        ~AStorage() {}
        A v;
    } a_;
    union WStorage {
        WStorage() noexcept {}
        ~WStorage() {}
        Held v;
    } w_;
    bool made_ = false;
};

}  // namespace eddy::detail
