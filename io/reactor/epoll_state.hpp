// io/reactor/epoll_state.hpp: what the readiness driver keeps beside the reactor's common state
// (reactor_epoll.cpp). Reactor thread only, except the file pool's queue (file_pool.hpp).
//
// # One registration per descriptor
//   epoll takes one registration per descriptor (per open file, in fact), while eddy may wait on
//   one descriptor for several reasons at once: a socket's standing poll (PollState, the
//   multishot poll's equivalent) and one-shot waits (an eddy::io::readable on a foreign
//   descriptor, a socket wait under a deadline, an operation that found its descriptor not
//   ready). So each descriptor has one FdWatch, registered edge-triggered with the union of
//   what its waiters want. Adding a waiter re-registers the descriptor (EPOLL_CTL_MOD), which
//   makes the kernel look at its readiness again and report it if it holds already: an edge
//   that came before the wait is not lost. An event goes to the standing poll, if any, and to
//   every one-shot waiter it concerns (each then leaves); a descriptor nobody waits on any more
//   is removed from epoll.
#pragma once

#include "private.hpp"
#include "reactor/file_pool.hpp"

#include <sys/epoll.h>

#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include <eddy/io/detail/operation.hpp>

namespace eddy::detail {

class PollState;

namespace epoll {

/// What a socket's standing poll waits for: the io_uring driver's multishot poll mask.
inline constexpr std::uint32_t kStateEvents = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI;
/// Always reported, asked or not.
inline constexpr std::uint32_t kAlways = EPOLLERR | EPOLLHUP;

// IoOperation::driver_step values (operation.hpp).
inline constexpr std::uint8_t kStepNone = 0;
inline constexpr std::uint8_t kStepReadySeen = 1;   // readiness came: a blocking listener's accept may go
inline constexpr std::uint8_t kStepConnecting = 2;  // connect(2) said EINPROGRESS: SO_ERROR after readiness
inline constexpr std::uint8_t kStepPooled = 3;      // on the file pool; back in the inbox when done

/// What a one-shot waiter waits for: its poll mask, or the direction its call goes.
inline std::uint32_t wanted(const IoOperation& op) noexcept {
    if (op.io == IoKind::kPoll) return op.len;
    const IoKind k = op.io;
    const bool out = k == IoKind::kWrite || k == IoKind::kWritev || k == IoKind::kSend || k == IoKind::kSendMsg ||
                     k == IoKind::kConnect;
    return out ? EPOLLOUT : EPOLLIN;
}

}  // namespace epoll

struct FdWatch {
    PollState* state = nullptr;      // a socket's standing poll, or none
    IoOperation* waiters = nullptr;  // one-shot waits, linked through ReactorNode::next
    std::uint32_t events = 0;        // what is registered with epoll (EPOLLET not included)
};

struct EpollState {
    EpollState(Reactor& reactor, std::string pool_thread_name, const RuntimeConfig& config)
        : pool(reactor, std::move(pool_thread_name), config) {}

    int fd = -1;
    /// epoll_pwait2 (Linux 5.11; a timeout in nanoseconds) works; else epoll_wait, whose
    /// milliseconds are rounded up.
    bool pwait2 = true;
    std::unordered_map<int, FdWatch> watches;
    /// The deadlines (eddy::with_deadline) of the operations that wait, earliest first: the
    /// readiness driver's equivalent of io_uring's linked timeouts (steady-clock ns).
    std::set<std::pair<std::int64_t, IoOperation*>> deadlines;
    FilePool pool;
};

}  // namespace eddy::detail
