// tests/support/socket_io.hpp: what the socket_io tests (tests/net/socket_io_*_test.cpp) share.
// The peer is usually a plain blocking socket driven from the test thread or a std::thread, so
// that what the kernel sees (the moment of a write, a FIN, a RST) is not scheduled by eddy:
// plain_connect, send_all. Tasks that must run while the test thread acts are started with
// Started (run() without the wait). Whether a task waits is read from the sockets_polled
// gauge (polled, wait_polled): a socket gets its poll only when an operation on it had to queue
// itself. `using namespace eddy::test::socket_io;` brings in the names the tests use.
#pragma once

#include <doctest/doctest.h>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <eddy/eddy.hpp>

#include "support/net_helpers.hpp"

namespace eddy::test::socket_io {

using eddy::OperationCancelled;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::io::FileDescriptor;
using eddy::net::SocketAddr;
using eddy::net::TcpListener;
using eddy::net::TcpStream;
using eddy::test::bytes;
using eddy::test::error_of;
using eddy::test::for_each_loopback;
using eddy::test::kDeadline;
using eddy::test::loopbacks;
using eddy::test::past;
using eddy::test::run;
using eddy::test::text;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// ---- Helpers ---------------------------------------------------------------------------

/// A task started on a runtime from the test thread, whose result the test thread takes
/// later: run() split in two, so the test thread can act (write, close, cancel) while the
/// task runs. get() fails the test instead of hanging, and keeps the JoinHandle until the
/// task has finished (see run()).
template <class T>
class Started {
public:
    Started(Runtime& rt, Task<T> task)
        : out_(std::make_shared<std::promise<T>>()), result_(out_->get_future()),
          handle_(rt.spawn(eddy::test::deliver(std::move(task), out_))) {}

    bool ready() const { return result_.wait_for(0s) == std::future_status::ready; }

    T get() {
        if (result_.wait_for(kDeadline) != std::future_status::ready) FAIL("a task did not finish in time");
        if (!eddy::test::wait_finished(handle_)) FAIL("a task did not finish in time");
        return result_.get();
    }

private:
    std::shared_ptr<std::promise<T>> out_;
    std::future<T> result_;
    eddy::JoinHandle<void> handle_;
};

/// connect(2) on a blocking socket, waiting out an EINTR (the handshake goes on: poll for it,
/// then take its result). 0, or the errno. No doctest: plain threads call it.
inline int connect_blocking(int fd, const SocketAddr& to) {
    if (::connect(fd, to.native(), to.native_size()) == 0) return 0;
    if (errno != EINTR) return errno;
    pollfd p{fd, POLLOUT, 0};
    int rc;
    while ((rc = ::poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kDeadline).count()))) < 0 && errno == EINTR) {
    }
    if (rc != 1) return rc == 0 ? ETIMEDOUT : errno;
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
    return err;
}

/// A blocking socket connected to `to` (the kernel completes the handshake from the backlog):
/// the peer the tests drive from plain threads. `rcvbuf` > 0 sets SO_RCVBUF before connecting.
/// Its sends and receives time out after kDeadline, so a lost close fails instead of hanging.
/// (The timeouts are set after connecting: with SO_SNDTIMEO a connect interrupted by a signal
/// fails with EINTR instead of restarting, as seen under TSan.)
inline FileDescriptor plain_connect(const SocketAddr& to, int rcvbuf = 0) {
    FileDescriptor fd(::socket(to.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
    REQUIRE(fd.get() >= 0);
    if (rcvbuf > 0) eddy::test::set_int_sockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, rcvbuf);
    const int err = connect_blocking(fd.get(), to);
    const std::string error = err == 0 ? std::string() : std::strerror(err);
    INFO("connect to " << to.to_string() << ": " << error);
    REQUIRE(err == 0);
    const timeval limit{std::chrono::duration_cast<std::chrono::seconds>(kDeadline).count(), 0};
    REQUIRE(::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit) == 0);
    REQUIRE(::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit) == 0);
    return fd;
}

/// Sends all of `data` on a blocking socket; false on an error (no doctest outside the test
/// thread: the callers count failures and check them there).
inline bool send_all(int fd, std::span<const std::byte> data) {
    while (!data.empty()) {
        const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        data = data.subspan(static_cast<std::size_t>(n));
    }
    return true;
}
inline bool send_all(int fd, std::string_view s) { return send_all(fd, bytes(s)); }

/// Spins until `flag` is set (false if kDeadline passes first).
inline bool spin_until(const std::atomic<bool>& flag) {
    const auto deadline = Clock::now() + kDeadline;
    while (!flag.load()) {
        if (past(deadline)) return false;
        std::this_thread::yield();
    }
    return true;
}

inline std::size_t polled(const Runtime& rt) { return rt.metrics().reactor.sockets_polled; }

/// Waits until the sockets_polled gauge reads `n` (the reactor publishes it once per turn);
/// false if `limit` passes first.
inline bool wait_polled(const Runtime& rt, std::size_t n, Clock::duration limit = kDeadline) {
    const auto deadline = Clock::now() + limit;
    while (polled(rt) != n) {
        if (past(deadline)) return false;
        std::this_thread::sleep_for(1ms);
    }
    return true;
}

inline std::size_t open_fds() {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
}

inline std::string as_string(const std::vector<std::byte>& v) { return text(v); }

/// One read into a 64-byte buffer in the task's frame: the text read, or nullopt if the read
/// was cancelled. Sets `about_to_wait` (if given) just before it awaits.
inline Task<std::optional<std::string>> read_once(TcpStream& s, std::stop_token t = {},
                                                  std::atomic<bool>* about_to_wait = nullptr) {
    std::array<std::byte, 64> buf{};
    if (about_to_wait != nullptr) about_to_wait->store(true);
    try {
        const std::size_t n = co_await s.read(buf, std::move(t));
        co_return text(std::span(buf).first(n));
    } catch (const OperationCancelled& e) {
        CHECK(e.code() == std::errc::operation_canceled);
        co_return std::nullopt;
    }
}

/// One read (64 bytes): its count.
inline Task<std::size_t> read_count(TcpStream& s, std::atomic<bool>* about_to_wait = nullptr) {
    std::array<std::byte, 64> buf{};
    if (about_to_wait != nullptr) about_to_wait->store(true);
    co_return co_await s.read(buf);
}

/// write_all as a Task of its own (for error_of), whatever write_all itself returns.
inline Task<void> write_all_task(TcpStream& s, std::span<const std::byte> data,
                                 std::atomic<bool>* about_to_wait = nullptr) {
    if (about_to_wait != nullptr) about_to_wait->store(true);
    co_await s.write_all(data);
}

/// `n` reads at once (when_all): their counts.
inline Task<std::vector<std::size_t>> read_counts(TcpStream& s, int n) {
    std::vector<Task<std::size_t>> v;
    for (int i = 0; i < n; ++i) v.push_back(read_count(s));
    co_return co_await eddy::when_all(std::move(v));
}

inline Task<std::string> read_exact_text(TcpStream& s, std::size_t n) {
    std::string out(n, '\0');
    co_await s.read_exact(std::as_writable_bytes(std::span(out)));
    co_return out;
}

/// Reads with a `size`-byte buffer until end of stream; everything read.
inline Task<std::string> read_all_with(TcpStream& s, std::size_t size) {
    std::vector<std::byte> buf(size);
    std::string out;
    for (;;) {
        const std::size_t n = co_await s.read(buf);
        if (n == 0) co_return out;
        out += text(std::span(buf).first(n));
    }
}

/// Returns once every worker has been free at the same moment (`workers` tasks that can only
/// finish together, eddy::test::rendezvous): a task that had started before and suspends only
/// to wait on its socket has queued itself on it by then.
inline void quiesce(Runtime& rt, std::size_t workers) {
    std::atomic<int> started{0};
    const std::vector<std::optional<std::size_t>> met =
        run(rt, [](std::atomic<int>& st, int n) -> Task<std::vector<std::optional<std::size_t>>> {
            std::vector<Task<std::optional<std::size_t>>> v;
            for (int i = 0; i < n; ++i) v.push_back(eddy::test::rendezvous(st, n));
            co_return co_await eddy::when_all(std::move(v));
        }(started, static_cast<int>(workers)));
    for (const auto& m : met) REQUIRE(m.has_value());
}

/// close() from a task of its own.
inline Task<void> close_stream(TcpStream& s) {
    s.close();
    co_return;
}
inline Task<void> close_listener(TcpListener& l) {
    l.close();
    co_return;
}

/// Waits until the gauge reads at least `n`, gives the reactor 50 ms more, and returns it.
inline std::size_t settled_polled(const Runtime& rt, std::size_t n) {
    const auto deadline = Clock::now() + kDeadline;
    while (polled(rt) < n && !past(deadline)) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(50ms);
    return polled(rt);
}

}  // namespace eddy::test::socket_io
