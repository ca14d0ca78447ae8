//! eddy/time/race_sleep.hpp: when_any(op, eddy::sleep(d)), an operation raced against a sleep,
//! without a coroutine frame.
//!
//!     auto r = co_await eddy::when_any(stream.read(buf), eddy::sleep(5s));
//!     if (r.index() == 1) ...          // the sleep won: the read was cancelled
//!
//! The general when_any runs each argument that is not a Task in a frame of its own; this
//! pairing is the commonest race there is, so it is a with_timeout in disguise
//! (eddy/time/timeout_of.hpp): the operation is awaited in place under a timer at the sleep's
//! deadline, and the result is a std::variant with the winner's index, as when_any gives.
//! (eddy::sleep_until(t) works the same.) What differs from two children racing:
//!   * the operation runs on the awaiting worker (a when_any's first child does too);
//!   * if the sleep's time comes while the operation is completing, the operation's value
//!     wins: a read's bytes are never dropped (the general when_any drops a loser's value);
//!   * a token given to the sleep (`eddy::sleep(d, token)`) stops the race early, as it would
//!     stop that sleep: the operation is cancelled and OperationCancelled is thrown.
//! Everything else is when_any's: the awaiter's cancellation cancels the operation
//! (OperationCancelled), and an exception of the operation is rethrown.
//! @file
#pragma once

#include <cstdint>
#include <optional>
#include <stop_token>
#include <type_traits>
#include <utility>
#include <variant>

#include <eddy/time/sleep.hpp>
#include <eddy/time/timeout_of.hpp>
#include <eddy/runtime/when_any.hpp>
#include <eddy/tasks/awaitable.hpp>

namespace eddy {

namespace detail {

/// TimeoutOf's extra for a sleep's token: a stop of the token stops the race's scope.
class SleepTokenLink {
public:
    explicit SleepTokenLink(std::stop_token token) noexcept : token_(std::move(token)) {}
    SleepTokenLink(SleepTokenLink&& o) noexcept : token_(std::move(o.token_)) {}
    void start(StopState& scope) {
        if (token_.stop_possible()) link_.emplace(token_, ForwardStop{&scope});  // may stop at once
    }
    void finish() noexcept { link_.reset(); }  // waits for a forward running elsewhere

private:
    std::stop_token token_;
    std::optional<std::stop_callback<ForwardStop>> link_;
};

template <class T>
inline constexpr bool is_sleep_v = std::is_same_v<std::remove_cvref_t<T>, SleepAwaiter>;

}  // namespace detail

/// What when_any(op, sleep) gives: the operation's value at index `OpIndex` (0 or 1) or
/// std::monostate at the other when the sleep won. Move it until it is awaited.
template <class H, std::size_t OpIndex>
class [[nodiscard]] RaceSleep : public detail::BorrowsLike<H> {
    using Inner = TimeoutOf<H, detail::SleepTokenLink>;
    using R = typename Inner::value_type;
    using V = detail::any_value_t<R>;

public:
    /// The winner's index and value, as when_any gives.
    using value_type =
        std::conditional_t<OpIndex == 0, std::variant<V, std::monostate>, std::variant<std::monostate, V>>;

    /// Made by when_any: `op` moved in (or borrowed), the sleep's deadline and token.
    RaceSleep(std::remove_reference_t<H>& op, const detail::SleepAwaiter& sleep)
        : inner_(op, detail::TimeoutSpec{sleep.deadline_ns(), {}, false}, std::in_place, sleep.token()) {}
    /// Movable until awaited.
    RaceSleep(RaceSleep&&) = default;
    RaceSleep& operator=(RaceSleep&&) = delete;

    bool await_ready() { return inner_.await_ready(); }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> parent) {
        return inner_.await_suspend(parent);
    }
    value_type await_resume() {
        auto r = inner_.await_resume_or();
        if constexpr (std::is_void_v<R>) {
            if (r) return value_type(std::in_place_index<OpIndex>);
        } else if constexpr (std::is_reference_v<R>) {
            if (r) return value_type(std::in_place_index<OpIndex>, *r);
        } else {
            if (r) return value_type(std::in_place_index<OpIndex>, std::move(*r));
        }
        return value_type(std::in_place_index<1 - OpIndex>);
    }
    void dump_wait(detail::DumpWait& d) const {
        d.text("when_any with a sleep, ");
        inner_.dump_wait(d);
    }

    /// As a Task (one coroutine frame), where a Task is needed.
    Task<value_type> into_task() && { return wrap(std::move(*this)); }
    /// into_task(), implicitly.
    operator Task<value_type>() && { return wrap(std::move(*this)); }

private:
    static Task<value_type> wrap(RaceSleep self) { co_return co_await std::move(self); }
    Inner inner_;
};

/// when_any(op, sleep): see above. (Two sleeps, or a Task against a sleep, race this way too.)
template <Awaitable A>
requires(!detail::is_sleep_v<A>) RaceSleep < detail::held_t<A>,
0 > when_any(A&& op, detail::SleepAwaiter&& sleep) {
    static_assert(std::is_rvalue_reference_v<A&&>,
                  "eddy::when_any takes the operations over: pass temporaries or std::move(op)");
    return RaceSleep<detail::held_t<A>, 0>(op, sleep);
}

/// when_any(sleep, op): the same with the sleep at index 0.
template <Awaitable A>
RaceSleep<detail::held_t<A>, 1> when_any(detail::SleepAwaiter&& sleep, A&& op) {
    static_assert(std::is_rvalue_reference_v<A&&>,
                  "eddy::when_any takes the operations over: pass temporaries or std::move(op)");
    return RaceSleep<detail::held_t<A>, 1>(op, sleep);
}

}  // namespace eddy
