// tests/support/move_ops.hpp: what the awaiter_move tests (tests/runtime/, tests/reactor/,
// tests/net/) share: naming the type a public call returns, moving an operation before its
// first await the way a combinator that owns it does (with_timeout(stream.read(buf), 1s)),
// and running a test body alone on one worker.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>

#include <eddy/runtime/runtime.hpp>
#include <eddy/tasks/task.hpp>

#include "support/net_helpers.hpp"

namespace eddy::test {

/// Only in decltype, with the arguments below: the type a public call returns.
template <class T>
T& ref();
[[maybe_unused]] inline std::span<std::byte> some_buf() noexcept { return {}; }
[[maybe_unused]] inline std::span<const std::byte> some_data() noexcept { return {}; }
[[maybe_unused]] inline std::span<const iovec> some_iov() noexcept { return {}; }

template <class A>
inline constexpr bool kMovable = std::is_move_constructible_v<A>;

/// The operation `make()` returns, made in place on the heap, then moved into a fresh object
/// (made in the caller's variable); the source is freed before the caller awaits. A pointer
/// the move left behind (into the source, as a vectored read's msghdr pointer would be)
/// points into freed memory then, and ASan reports its use.
template <class Make>
auto relocate(Make&& make) {
    using Op = decltype(make());
    std::unique_ptr<Op> source(new Op(make()));
    return Op(std::move(*source));
}

/// Runs `body` as the only task of a one-worker runtime: what it spawns runs only once it
/// suspends, so a moved operation really waits before it completes.
template <class T>
T run_alone(Task<T> body) {
    Runtime rt(RuntimeConfig{.workers = 1});
    return run(rt, std::move(body));
}

}  // namespace eddy::test
