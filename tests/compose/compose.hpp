// tests/compose/compose.hpp: the driver of the composition suite (tests/compose/): every
// public awaitable eddy hands out, under every combinator that takes one.
//
// A fixture describes one awaitable (a member function's result: `stream.read(buf)`,
// `mutex.lock()`, `eddy::sleep(d)`, a Task such as `socket.recv(buf)`) in two forms:
//   * completing: after arm(), it finishes at once with a value that check() asserts;
//   * blocking (where it has one): after hold(), it waits until it is cancelled. After each
//     run the fixture's recheck() proves the resource still works: a timed-out read lost no
//     bytes, a timed-out lock wait holds no lock, a timed-out receive eats no later value.
// completing_pairs() and blocking_pairs() put each form under each combinator on a worker;
// from_thread_completing() and from_thread_blocking() under Runtime::block_on from the test
// thread. The suite fails to build when a pair stops composing, and fails when one composes
// to the wrong behaviour. Not paired with the blocking form: shield (it keeps the
// cancellation out, so the wait would never end), and the spawning combinators for an
// operation that borrows from its caller (refused at compile time, as they should be).
//
// The clock is paused (eddy/runtime/time.hpp): it jumps to the next timer once the runtime is
// quiet, so a timeout fires exactly at its time on any machine load, and a 24 h wait costs
// nothing. Every completing form finishes without waiting for time or for another process.
//
// Build cost: the driver is instantiated once per operation type, not once per fixture:
// Hooks<Op> erases the fixture, so TcpStream::read and UnixStream::write (both a
// SocketAwaiter) share one. A fixture is a plain struct:
//
//     struct MutexLock {
//         eddy::Mutex mutex;
//         std::optional<eddy::MutexGuard> held;
//         Task<void> setup();               // optional: once, on a worker
//         Task<void> arm();                 // optional: completing() will finish at once
//         auto completing();                // the operation
//         void check(R value);              // R: what it gives (std::monostate for void)
//         Task<void> hold();                // optional: blocking() will wait
//         auto blocking();                  // optional: the same type as completing()
//         Task<void> recheck();             // optional: after a cancelled blocking() run
//         eddy::Runtime* rt;                // optional: set by check_all
//     };
//     TEST_CASE("sync: Mutex::lock") { eddy::test::compose::check_all<MutexLock>(); }
#pragma once

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <eddy/eddy.hpp>

#include "support/net_helpers.hpp"

namespace eddy::test::compose {

using namespace std::chrono_literals;

inline RuntimeConfig paused() { return RuntimeConfig{.workers = 2, .clock = ClockMode::paused}; }

/// The combinator under test, named in every failure (the checks run on the workers, where
/// doctest's INFO does not reach).
inline std::atomic<const char*> current_step{""};
inline void step(const char* s) { current_step.store(s); }

/// A CHECK that names the combinator it ran under.
#define COMPOSE_CHECK(...) \
    CHECK_MESSAGE((__VA_ARGS__), "under " << std::string(::eddy::test::compose::current_step.load()))

/// What an operation of result R gives a check: R, std::monostate for void.
template <class R>
using Value = std::conditional_t<std::is_void_v<R>, std::monostate, R>;

/// A fixture, erased: the driver is instantiated per operation type only.
template <class Op>
struct Hooks {
    using R = await_result_t<Op>;
    Runtime* rt = nullptr;
    std::function<Task<void>()> arm;
    std::function<Op()> completing;
    std::function<void(Value<R>)> check;
    std::function<Task<void>()> hold;
    std::function<Op()> blocking;  // empty: the operation never waits
    std::function<Task<void>()> recheck;
};

/// Operations that may be spawned: they own what they use (eddy/tasks/awaitable.hpp).
template <class Op>
inline constexpr bool kOwning = !borrows_operands_v<Op> && detail::ownable_v<Op>;

/// Awaits `A` as it is (in the awaiting task, no frame) and gives its result as a Value, so
/// that one line checks void and non-void operations alike.
template <class A>
class Valued {
public:
    explicit Valued(A& a) : slot_(a) {}
    Valued(Valued&&) = default;
    bool await_ready() { return slot_.get().await_ready(); }
    template <class P>
    decltype(auto) await_suspend(std::coroutine_handle<P> h) {
        return slot_.get().await_suspend(h);
    }
    Value<await_result_t<A>> await_resume() {
        if constexpr (std::is_void_v<await_result_t<A>>) {
            slot_.get().await_resume();
            return {};
        } else {
            return slot_.get().await_resume();
        }
    }

private:
    detail::AwaiterSlot<A> slot_;
};
template <class A>
Valued<std::remove_cvref_t<A>> valued(A&& a) {
    return Valued<std::remove_cvref_t<A>>(a);
}

/// Pipes (and FIFOs) of one page that a test fills to the brim, so that a write waits: the
/// bytes in the pipe (either end), the page made the pipe's size, filled, drained.
inline std::size_t pipe_bytes(int fd) {
    int n = 0;
    if (::ioctl(fd, FIONREAD, &n) != 0) throw std::system_error(errno, std::system_category(), "FIONREAD");
    return static_cast<std::size_t>(n);
}
inline std::size_t pipe_capacity(int fd) {
    const int n = ::fcntl(fd, F_GETPIPE_SZ);
    if (n < 0) throw std::system_error(errno, std::system_category(), "F_GETPIPE_SZ");
    return static_cast<std::size_t>(n);
}
inline void shrink_pipe(int fd) {
    if (::fcntl(fd, F_SETPIPE_SZ, 4096) < 0) throw std::system_error(errno, std::system_category(), "F_SETPIPE_SZ");
}
inline void fill_pipe(int write_fd) {  // writes only what fits: never blocks
    const std::vector<char> fill(pipe_capacity(write_fd) - pipe_bytes(write_fd), 'f');
    if (!fill.empty() && ::write(write_fd, fill.data(), fill.size()) != static_cast<ssize_t>(fill.size()))
        throw std::system_error(errno, std::system_category(), "write");
}
inline std::string drain_pipe(int read_fd) {  // reads only what is there: never blocks
    std::string out(pipe_bytes(read_fd), '\0');
    if (!out.empty() && ::read(read_fd, out.data(), out.size()) != static_cast<ssize_t>(out.size()))
        throw std::system_error(errno, std::system_category(), "read");
    return out;
}

/// Writes `text` to a pipe, FIFO or socket that has room for it (the test's own writes).
inline void put(int fd, std::string_view text) {
    COMPOSE_CHECK(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
}

inline Task<int> seven() { co_return 7; }
inline Task<int> sleeper(std::chrono::nanoseconds d) {
    co_await sleep(d);
    co_return 1;
}
/// What fail_after throws: no eddy exception derives from it.
struct Planned : std::exception {};
inline Task<int> fail_after(std::chrono::nanoseconds d) {
    co_await sleep(d);
    throw Planned();
}
inline Task<void> stop_after(std::stop_source& source, std::chrono::nanoseconds d) {
    co_await sleep(d);
    source.request_stop();
}
/// True when `t` ended by OperationCancelled.
template <class T>
Task<bool> ends_cancelled(Task<T> t) {
    try {
        (void)co_await std::move(t);
    } catch (const OperationCancelled&) {
        co_return true;
    }
    co_return false;
}

/// The completing form under each combinator; a fresh arm() before each run.
template <class Op>
Task<void> completing_pairs(Hooks<Op>& h) {
    using R = await_result_t<Op>;
    Event never;  // never set: the other operation a winner races
    step("completing form, with_timeout(op, duration)");
    co_await h.arm();
    h.check(co_await valued(with_timeout(h.completing(), 1s)));
    step("completing form, with_timeout(op, time point)");
    co_await h.arm();
    h.check(co_await valued(with_timeout(h.completing(), time::now() + 1s)));
    step("completing form, timeout_or(op, duration)");
    co_await h.arm();
    auto maybe = co_await timeout_or(h.completing(), 1s);
    COMPOSE_CHECK(static_cast<bool>(maybe));
    if constexpr (std::is_void_v<R>) h.check({});
    else if (maybe) h.check(std::move(*maybe));
    step("completing form, with_deadline(duration, op)");
    co_await h.arm();
    h.check(co_await valued(with_deadline(1s, h.completing())));
    step("completing form, when_all(op, sleep)");
    co_await h.arm();
    auto [v1, slept] = co_await when_all(h.completing(), sleep(1ms));
    h.check(std::move(v1));
    step("completing form, when_all(op, task)");
    co_await h.arm();
    auto [v2, seven_] = co_await when_all(h.completing(), seven());
    COMPOSE_CHECK(seven_ == 7);
    h.check(std::move(v2));
    step("completing form, when_any(op, sleep): the frame-free race");
    co_await h.arm();
    auto r1 = co_await when_any(h.completing(), sleep(1s));
    COMPOSE_CHECK(r1.index() == 0);
    if (r1.index() == 0) h.check(std::move(std::get<0>(r1)));
    step("completing form, when_any(op, task)");
    co_await h.arm();
    auto r2 = co_await when_any(h.completing(), sleeper(24h));
    COMPOSE_CHECK(r2.index() == 0);
    if (r2.index() == 0) h.check(std::move(std::get<0>(r2)));
    step("completing form, when_any(op, another operation)");
    co_await h.arm();
    auto r3 = co_await when_any(h.completing(), never.operator co_await());
    COMPOSE_CHECK(r3.index() == 0);
    if (r3.index() == 0) h.check(std::move(std::get<0>(r3)));
    step("completing form, when_any_all_results(op, sleep)");
    co_await h.arm();
    auto all = co_await when_any_all_results(h.completing(), sleep(1s));
    COMPOSE_CHECK(all.winner == 0);
    COMPOSE_CHECK(!std::get<1>(all.values).has_value());
    if (std::get<0>(all.values)) h.check(std::move(*std::get<0>(all.values)));
    step("completing form, when_all(std::vector<op>)");
    co_await h.arm();
    std::vector<Op> ops;
    ops.push_back(h.completing());
    if constexpr (std::is_void_v<R>) {
        co_await when_all(std::move(ops));
        h.check({});
    } else {
        auto values = co_await when_all(std::move(ops));
        COMPOSE_CHECK(values.size() == 1);
        if (values.size() == 1) h.check(std::move(values[0]));
    }
    step("completing form, when_any(std::vector<op>)");
    co_await h.arm();
    ops.clear();
    ops.push_back(h.completing());
    if constexpr (std::is_void_v<R>) {
        const std::size_t won = co_await when_any(std::move(ops));
        COMPOSE_CHECK(won == 0);
        h.check({});
    } else {
        auto won = co_await when_any(std::move(ops));
        COMPOSE_CHECK(won.index == 0);
        h.check(std::move(won.value));
    }
    step("completing form, shield(op)");
    co_await h.arm();
    h.check(co_await valued(shield(h.completing())));
    step("completing form, with_stop_token(op, token)");
    co_await h.arm();
    std::stop_source live;
    h.check(co_await valued(with_stop_token(h.completing(), live.get_token())));
    if constexpr (kOwning<Op>) {
        step("completing form, eddy::spawn(op)");
        co_await h.arm();
        h.check(co_await valued(spawn(h.completing())));
        step("completing form, eddy::spawn_abortable(op)");
        co_await h.arm();
        h.check(co_await valued(spawn_abortable(h.completing())));
        step("completing form, Runtime::spawn(op)");
        co_await h.arm();
        h.check(co_await valued(h.rt->spawn(h.completing())));
        step("completing form, JoinSet::spawn(op)");
        co_await h.arm();
        JoinSet<R> set;
        set.spawn(h.completing());
        auto joined = co_await set.join_next();
        COMPOSE_CHECK(joined.has_value());
        if (joined) h.check(std::move(*joined));
        if constexpr (std::is_void_v<R>) {
            step("completing form, TaskGroup::spawn(op)");
            co_await h.arm();
            co_await task_group([&h](TaskGroup& g) -> Task<void> {
                g.spawn(h.completing());
                co_return;
            });
            h.check({});
        }
    }
    step("");
}

/// The blocking form under each combinator that ends it; recheck() after each run.
template <class Op>
Task<void> blocking_pairs(Hooks<Op>& h) {
    Event ready;
    ready.set();
    co_await h.hold();
    step("blocking form, with_timeout(op, duration)");
    auto t0 = time::now();
    CHECK_THROWS_AS((void)co_await with_timeout(h.blocking(), 1s), TimedOut);
    COMPOSE_CHECK(time::now() - t0 == 1s);  // the timer's second, not a tick more
    co_await h.recheck();
    step("blocking form, with_timeout(op, time point)");
    CHECK_THROWS_AS((void)co_await with_timeout(h.blocking(), time::now() + 1s), TimedOut);
    co_await h.recheck();
    step("blocking form, timeout_or(op, duration)");
    auto none = co_await timeout_or(h.blocking(), 1s);
    COMPOSE_CHECK(!static_cast<bool>(none));
    co_await h.recheck();
    step("blocking form, with_deadline(duration, op)");
    CHECK_THROWS_AS((void)co_await with_deadline(1s, h.blocking()), TimedOut);
    co_await h.recheck();
    step("blocking form, when_any(op, sleep): the frame-free race");
    auto r1 = co_await when_any(h.blocking(), sleep(1s));
    COMPOSE_CHECK(r1.index() == 1);
    co_await h.recheck();
    step("blocking form, when_any(op, task)");
    auto r2 = co_await when_any(h.blocking(), sleeper(1s));
    COMPOSE_CHECK(r2.index() == 1);
    co_await h.recheck();
    step("blocking form, when_any(op, another operation)");
    auto r3 = co_await when_any(h.blocking(), ready.operator co_await());
    COMPOSE_CHECK(r3.index() == 1);
    co_await h.recheck();
    step("blocking form, when_any_all_results(op, sleep)");
    auto all = co_await when_any_all_results(h.blocking(), sleep(1s));
    COMPOSE_CHECK(all.winner == 1);
    COMPOSE_CHECK(!std::get<0>(all.values).has_value());
    co_await h.recheck();
    step("blocking form, when_all(op, a task that fails): the failure, the operation cancelled");
    CHECK_THROWS_AS((void)co_await when_all(h.blocking(), fail_after(1s)), Planned);
    co_await h.recheck();
    step("blocking form, timeout_or(when_all(std::vector<op>))");
    std::vector<Op> ops;
    ops.push_back(h.blocking());
    auto none_all = co_await timeout_or(when_all(std::move(ops)), 1s);
    COMPOSE_CHECK(!static_cast<bool>(none_all));
    co_await h.recheck();
    step("blocking form, timeout_or(when_any(std::vector<op>))");
    ops.clear();
    ops.push_back(h.blocking());
    auto none_any = co_await timeout_or(when_any(std::move(ops)), 1s);
    COMPOSE_CHECK(!static_cast<bool>(none_any));
    co_await h.recheck();
    step("blocking form, with_stop_token(op, token), stopped while it waits");
    std::stop_source source;
    auto [cancelled, stopped] =
        co_await when_all(ends_cancelled(with_stop_token(h.blocking(), source.get_token())), stop_after(source, 1s));
    COMPOSE_CHECK(cancelled);
    co_await h.recheck();
    step("blocking form, with_stop_token(op, token), stopped before");
    CHECK_THROWS_AS((void)co_await with_stop_token(h.blocking(), source.get_token()), OperationCancelled);
    co_await h.recheck();
    if constexpr (kOwning<Op>) {
        using R = await_result_t<Op>;
        step("blocking form, eddy::spawn(timeout_or(op))");
        auto spawned = co_await spawn(timeout_or(h.blocking(), 1s));
        COMPOSE_CHECK(!static_cast<bool>(spawned));
        co_await h.recheck();
        step("blocking form, Runtime::spawn(timeout_or(op))");
        auto spawned_rt = co_await h.rt->spawn(timeout_or(h.blocking(), 1s));
        COMPOSE_CHECK(!static_cast<bool>(spawned_rt));
        co_await h.recheck();
        step("blocking form, eddy::spawn_abortable(op), aborted");
        JoinHandle<R> handle = spawn_abortable(h.blocking());
        co_await sleep(1s);
        handle.abort();
        CHECK_THROWS_AS((void)co_await std::move(handle), TaskAborted);
        co_await h.recheck();
        step("blocking form, JoinSet::spawn(op), aborted");
        JoinSet<R> set;
        set.spawn(h.blocking());
        co_await sleep(1s);
        set.abort_all();
        CHECK_THROWS_AS((void)co_await set.join_next(), TaskAborted);
        co_await h.recheck();
        if constexpr (std::is_void_v<R>) {
            step("blocking form, TaskGroup::spawn(op), the group cancelled");
            co_await task_group([&h](TaskGroup& g) -> Task<void> {
                g.spawn(h.blocking());
                co_await sleep(1s);
                g.cancel();
            });
            co_await h.recheck();
        }
    }
    step("");
}

/// Runtime::block_on from the test thread: the completing form's value, the blocking form
/// under timeout_or.
template <class Op>
void from_thread_completing(Runtime& rt, Hooks<Op>& h) {
    step("completing form, Runtime::block_on(op)");
    run(rt, h.arm());
    if constexpr (std::is_void_v<await_result_t<Op>>) {
        rt.block_on(h.completing());
        h.check({});
    } else {
        h.check(rt.block_on(h.completing()));
    }
}
template <class Op>
void from_thread_blocking(Runtime& rt, Hooks<Op>& h) {
    step("blocking form, Runtime::block_on(timeout_or(op))");
    auto none = rt.block_on(timeout_or(h.blocking(), 1s));
    COMPOSE_CHECK(!static_cast<bool>(none));
    run(rt, h.recheck());
}

inline Task<void> nothing() { co_return; }

/// Hooks over the fixture `fx`, whose optional members default to doing nothing.
template <class F>
auto hooks_of(F& fx, Runtime& rt) {
    using Op = decltype(fx.completing());
    Hooks<Op> h;
    h.rt = &rt;
    if constexpr (requires { fx.arm(); }) h.arm = [&fx] { return fx.arm(); };
    else h.arm = nothing;
    h.completing = [&fx] { return fx.completing(); };
    h.check = [&fx](Value<await_result_t<Op>> v) { fx.check(std::move(v)); };
    if constexpr (requires { fx.blocking(); }) {
        static_assert(std::is_same_v<decltype(fx.blocking()), Op>, "both forms are one operation type");
        h.blocking = [&fx] { return fx.blocking(); };
        if constexpr (requires { fx.hold(); }) h.hold = [&fx] { return fx.hold(); };
        else h.hold = nothing;
        if constexpr (requires { fx.recheck(); }) h.recheck = [&fx] { return fx.recheck(); };
        else h.recheck = nothing;
    }
    return h;
}

/// The fixture F under every combinator: one runtime, one fixture, every pair.
template <class F>
void check_all() {
    F fx;  // before the runtime: its shutdown destroys tasks still waiting on the fixture
    Runtime rt(paused());
    if constexpr (requires { fx.rt; }) fx.rt = &rt;  // a fixture that spawns from the test thread
    step("setup");
    try {
        if constexpr (requires { fx.setup(); }) run(rt, fx.setup());
        auto h = hooks_of(fx, rt);
        run(rt, completing_pairs(h));
        from_thread_completing(rt, h);
        if constexpr (requires { fx.blocking(); }) {
            run(rt, blocking_pairs(h));
            from_thread_blocking(rt, h);
        }
    } catch (const std::exception& e) {  // name the pair that threw where no CHECK expected it
        FAIL("under " << std::string(current_step.load()) << ": " << std::string(e.what()));
    }
}

}  // namespace eddy::test::compose
