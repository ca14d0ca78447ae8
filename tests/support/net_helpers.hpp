// tests/support/net_helpers.hpp: helpers shared by the socket, file and pipe tests
// (tests/net/, tests/fs/, tests/streams/pipe_test.cpp).
//
// run() drives one task on a runtime and waits for it with kDeadline, so a lost wake-up fails
// the test instead of hanging it; TempDir is a scratch directory under /tmp that removes
// itself; the TCP helpers make a connected pair, read to end of stream and echo;
// for_each_loopback runs a case on every loopback address and worker count; the rest
// converts between text and bytes, makes test payloads, and adjusts socket options and
// RLIMIT_NOFILE.
#pragma once

#include <doctest/doctest.h>

#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <future>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include <eddy/io/stream.hpp>
#include <eddy/net/socket_addr.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/net/tcp_stream.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/tasks/task.hpp>

#include "support/waiting.hpp"

namespace eddy::test {

template <class T>
Task<void> deliver(Task<T> task, std::shared_ptr<std::promise<T>> out) {
    try {
        if constexpr (std::is_void_v<T>) {
            co_await std::move(task);
            out->set_value();
        } else {
            out->set_value(co_await std::move(task));
        }
    } catch (...) {
        out->set_exception(std::current_exception());
    }
}

/// Runs `task` on `rt` and returns its result (or rethrows its exception). Fails the test if
/// it has not finished after kDeadline: that means a hang, never slowness. (The promise is
/// shared with the task, so a task that finishes after a failed wait touches nothing freed.)
///
/// The JoinHandle is kept until the task has finished, so its frame, with the last reference
/// to an exception it delivered, is destroyed on this thread. Otherwise the worker could
/// drop that reference after this thread has read the exception, and the exception's
/// reference count lives in libstdc++'s own (uninstrumented) code, which TSan cannot see.
template <class T>
T run(Runtime& rt, Task<T> task) {
    auto out = std::make_shared<std::promise<T>>();
    std::future<T> result = out->get_future();
    JoinHandle<void> h = rt.spawn(deliver(std::move(task), out));
    if (result.wait_for(kDeadline) != std::future_status::ready) FAIL("the test task did not finish in time");
    if (!wait_finished(h)) FAIL("the test task did not finish in time");
    return result.get();
}

/// run() of any other awaitable (eddy::Timeout, an operation): in a frame of its own.
template <eddy::detail::NonTaskAwaitable A>
decltype(auto) run(Runtime& rt, A&& a) {
    return run(rt, eddy::detail::in_place_task(std::forward<A>(a)));
}

/// The error a task ends with: the code of the std::system_error it throws, or an empty
/// code if it succeeds. Any other exception propagates.
template <class T>
Task<std::error_code> error_of(Task<T> task) {
    try {
        (void)co_await std::move(task);
    } catch (const std::system_error& e) {
        co_return e.code();
    }
    co_return std::error_code{};
}

inline std::span<const std::byte> bytes(std::string_view s) { return std::as_bytes(std::span(s)); }
inline std::string text(std::span<const std::byte> b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

/// Both ends of one TCP connection.
struct Connection {
    net::TcpStream client;
    net::TcpStream server;
};

/// A connected pair: the client connects (the kernel completes the handshake from the
/// backlog), then the listener accepts it.
inline Task<Connection> connect_pair(net::TcpListener& listener) {
    net::TcpStream client = co_await net::TcpStream::connect(listener.local_address());
    net::TcpStream server = co_await listener.accept();
    co_return Connection{std::move(client), std::move(server)};
}

/// One read or one write as a task of its own, so error_of() can take what it throws.
inline Task<std::size_t> read_some(net::TcpStream& s, std::span<std::byte> buf) { co_return co_await s.read(buf); }
inline Task<std::size_t> write_some(net::TcpStream& s, std::span<const std::byte> data) {
    co_return co_await s.write(data);
}

/// Reads until end of stream (any io::AsyncReadStream); returns everything read.
template <io::AsyncReadStream S>
Task<std::string> read_to_end(S& s) {
    std::string out;
    std::array<std::byte, 4096> buf;
    for (;;) {
        const std::size_t n = co_await s.read(buf);
        if (n == 0) co_return out;
        out += text(std::span(buf).first(n));
    }
}

/// Echoes everything `s` reads back to it until end of stream, then closes it.
inline Task<void> echo(net::TcpStream s) {
    std::array<std::byte, 4096> buf;
    for (;;) {
        const std::size_t n = co_await s.read(buf);
        if (n == 0) co_return;
        co_await s.write_all(std::span(buf).first(n));
    }
}

/// A payload that is not periodic at any small period, so a lost, repeated or reordered chunk
/// shows up as a mismatch.
inline std::vector<std::byte> pattern(std::size_t n, std::uint32_t seed = 1) {
    std::vector<std::byte> v(n);
    std::uint32_t x = seed * 2654435761u + 1;
    for (auto& b : v) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b = static_cast<std::byte>(x >> 24);
    }
    return v;
}

/// A directory under /tmp, removed with its contents on destruction.
class TempDir {
public:
    TempDir() {
        std::string tmpl = "/tmp/eddy-test-XXXXXX";
        if (::mkdtemp(tmpl.data()) == nullptr) throw std::system_error(errno, std::system_category(), "mkdtemp");
        path_ = tmpl;
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    const std::filesystem::path& path() const { return path_; }
    std::string file(std::string_view name) const { return (path_ / name).string(); }

private:
    std::filesystem::path path_;
};

/// True if the machine can bind ::1 (containers without IPv6 cannot).
inline bool ipv6_loopback_available() {
    const int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    const auto a = net::SocketAddr::loopback_v6(0);
    const bool ok = ::bind(fd, a.native(), a.native_size()) == 0;
    ::close(fd);
    return ok;
}

/// The loopback addresses (port 0) the socket tests run over: IPv4, and IPv6 where present.
inline std::vector<net::SocketAddr> loopbacks() {
    std::vector<net::SocketAddr> v{net::SocketAddr::loopback_v4(0)};
    if (ipv6_loopback_available()) v.push_back(net::SocketAddr::loopback_v6(0));
    else MESSAGE("::1 cannot be bound here: the IPv6 half of this test is skipped");
    return v;
}

/// The scaffold of the socket tests that run a case on every loopback address and on runtimes
/// of 1 and 2 workers (one worker: every wake-up runs on the thread that computes; two: a
/// completion can land on the other): body(lo, workers) for each pair, the address's loop
/// outside, with both CAPTUREd so that a failing CHECK names the pair.
template <class Body>
void for_each_loopback(std::initializer_list<std::size_t> worker_counts, Body&& body) {
    for (const net::SocketAddr& lo : loopbacks()) {
        for (const std::size_t workers : worker_counts) {
            CAPTURE(lo.to_string());
            CAPTURE(workers);
            body(lo, workers);
        }
    }
}

/// for_each_loopback with 1 worker, then 2.
template <class Body>
void for_each_loopback(Body&& body) {
    for_each_loopback({1, 2}, std::forward<Body>(body));
}

inline void set_int_sockopt(int fd, int level, int name, int value) {
    if (::setsockopt(fd, level, name, &value, sizeof value) != 0)
        throw std::system_error(errno, std::system_category(), "setsockopt");
}

inline int get_int_sockopt(int fd, int level, int name) {
    int value = 0;
    socklen_t len = sizeof value;
    if (::getsockopt(fd, level, name, &value, &len) != 0)
        throw std::system_error(errno, std::system_category(), "getsockopt");
    return value;
}

/// SO_LINGER {on, 0}: closing the socket then sends RST instead of FIN.
inline void linger_zero(int fd) {
    const linger l{1, 0};
    if (::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l) != 0)
        throw std::system_error(errno, std::system_category(), "setsockopt(SO_LINGER)");
}

/// Sets the soft RLIMIT_NOFILE for the current scope and restores the old limits after.
class ScopedFdLimit {
public:
    explicit ScopedFdLimit(rlim_t soft) {
        if (::getrlimit(RLIMIT_NOFILE, &saved_) != 0)
            throw std::system_error(errno, std::system_category(), "getrlimit");
        rlimit rl = saved_;
        rl.rlim_cur = soft;
        if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) throw std::system_error(errno, std::system_category(), "setrlimit");
    }
    ScopedFdLimit(const ScopedFdLimit&) = delete;
    ScopedFdLimit& operator=(const ScopedFdLimit&) = delete;
    ~ScopedFdLimit() { ::setrlimit(RLIMIT_NOFILE, &saved_); }

private:
    rlimit saved_{};
};

/// One more than the highest open descriptor: a soft RLIMIT_NOFILE of this value leaves no
/// room above the descriptors open now (only the holes below them).
inline int fd_ceiling() {
    int highest = -1;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
        const int fd = std::atoi(e.path().filename().c_str());
        if (fd > highest) highest = fd;
    }
    return highest + 1;
}

}  // namespace eddy::test
