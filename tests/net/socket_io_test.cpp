// tests/net/socket_io_test.cpp: the readiness-based socket path (eddy/net/detail/socket_io.hpp,
// io/reactor/poll_state.hpp) as TcpStream and TcpListener use it, over loopback, IPv4 and IPv6:
//   - a waiting read cancelled by its own token (or its task's) from a plain thread, alone and
//     racing a peer's write 200 times: every byte read exactly once, in order;
//   - end of stream: the waiting read returns 0, every read after it 0 at once (also when the
//     last bytes and the FIN come together), and the socket's multishot poll goes with the stream
//     (Runtime::metrics().reactor.sockets_polled);
//   - a connection dropped mid-read: FIN after random chunks (every byte, then 0), RST with
//     SO_LINGER 0 (a prefix of the bytes, then ECONNRESET or 0; never a hang);
//   - close() from another task while tasks wait: a write on a full socket fails with EPIPE, a
//     read and a write waiting together end with 0 and EPIPE, several accepts with EINVAL (one
//     pending accept is tcp_test.cpp's);
//   - two tasks whose first operation on a socket waits at the same moment (two accepts; a read
//     and a write_all): one poll for the socket, and close() ends both as promised;
//   - four tasks accepting on one listener: 100 connections, each accepted once, every acceptor
//     stopped by one stop_source, no descriptor left open;
//   - a completion reaching an idle worker while the other computes for 300 ms (and, with one
//     worker, running after the computation);
//   - 64 readers woken at once.
//
// The peer is usually a plain blocking socket driven from the test thread or a std::thread, so
// that what the kernel sees (the moment of a write, a FIN, a RST) is not scheduled by eddy.
// Tasks that must run while the test thread acts are started with Started (run() without the
// wait). Whether a task waits is read from the sockets_polled gauge: a socket gets its poll
// only when an operation on it had to queue itself.
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

namespace {

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
int connect_blocking(int fd, const SocketAddr& to) {
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
FileDescriptor plain_connect(const SocketAddr& to, int rcvbuf = 0) {
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
bool send_all(int fd, std::span<const std::byte> data) {
    while (!data.empty()) {
        const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        data = data.subspan(static_cast<std::size_t>(n));
    }
    return true;
}
bool send_all(int fd, std::string_view s) { return send_all(fd, bytes(s)); }

/// Spins until `flag` is set (false if kDeadline passes first).
bool spin_until(const std::atomic<bool>& flag) {
    const auto deadline = Clock::now() + kDeadline;
    while (!flag.load()) {
        if (past(deadline)) return false;
        std::this_thread::yield();
    }
    return true;
}

std::size_t polled(const Runtime& rt) { return rt.metrics().reactor.sockets_polled; }

/// Waits until the sockets_polled gauge reads `n` (the reactor publishes it once per turn);
/// false if `limit` passes first.
bool wait_polled(const Runtime& rt, std::size_t n, Clock::duration limit = kDeadline) {
    const auto deadline = Clock::now() + limit;
    while (polled(rt) != n) {
        if (past(deadline)) return false;
        std::this_thread::sleep_for(1ms);
    }
    return true;
}

std::size_t open_fds() {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
}

std::string as_string(const std::vector<std::byte>& v) { return text(v); }

/// One read into a 64-byte buffer in the task's frame: the text read, or nullopt if the read
/// was cancelled. Sets `about_to_wait` (if given) just before it awaits.
Task<std::optional<std::string>> read_once(TcpStream& s, std::stop_token t = {},
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
Task<std::size_t> read_count(TcpStream& s, std::atomic<bool>* about_to_wait = nullptr) {
    std::array<std::byte, 64> buf{};
    if (about_to_wait != nullptr) about_to_wait->store(true);
    co_return co_await s.read(buf);
}

/// write_all as a Task of its own (for error_of), whatever write_all itself returns.
Task<void> write_all_task(TcpStream& s, std::span<const std::byte> data, std::atomic<bool>* about_to_wait = nullptr) {
    if (about_to_wait != nullptr) about_to_wait->store(true);
    co_await s.write_all(data);
}

/// `n` reads at once (when_all): their counts.
Task<std::vector<std::size_t>> read_counts(TcpStream& s, int n) {
    std::vector<Task<std::size_t>> v;
    for (int i = 0; i < n; ++i) v.push_back(read_count(s));
    co_return co_await eddy::when_all(std::move(v));
}

Task<std::string> read_exact_text(TcpStream& s, std::size_t n) {
    std::string out(n, '\0');
    co_await s.read_exact(std::as_writable_bytes(std::span(out)));
    co_return out;
}

/// Reads with a `size`-byte buffer until end of stream; everything read.
Task<std::string> read_all_with(TcpStream& s, std::size_t size) {
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
void quiesce(Runtime& rt, std::size_t workers) {
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
Task<void> close_stream(TcpStream& s) {
    s.close();
    co_return;
}
Task<void> close_listener(TcpListener& l) {
    l.close();
    co_return;
}

} // namespace

// ---- 1. Cancelling a waiting read from a plain thread -------------------------------------

TEST_CASE("a read waiting on a quiet socket, cancelled from a plain thread, consumes nothing") {
    for_each_loopback([&](const SocketAddr& lo, const std::size_t workers) {
        // By the read's own token, and by its task's cancellation (with_stop_token).
        for (const bool by_task : {false, true}) {
            CAPTURE(by_task);
            auto listener = TcpListener::bind(lo);
            Runtime rt(RuntimeConfig{.workers = workers});
            FileDescriptor peer = plain_connect(listener.local_address());
            TcpStream s = run(rt, listener.accept());
            const std::size_t base = polled(rt);

            std::stop_source stop;
            Started<std::optional<std::string>> pending(
                rt, by_task ? eddy::with_stop_token(read_once(s), stop.get_token()) : read_once(s, stop.get_token()));
            REQUIRE(wait_polled(rt, base + 1));  // the read has queued itself: the socket is polled
            CHECK_FALSE(pending.ready());
            std::thread canceller([&stop] { stop.request_stop(); });
            canceller.join();
            CHECK(pending.get() == std::nullopt);  // OperationCancelled

            REQUIRE(send_all(peer.get(), "abc"));
            CHECK(run(rt, read_once(s)) == std::optional<std::string>("abc"));
            // And the socket goes on working with its poll armed.
            REQUIRE(send_all(peer.get(), "defg"));
            CHECK(run(rt, read_once(s)) == std::optional<std::string>("defg"));
        }
    });
}

TEST_CASE("200 reads cancelled from a plain thread while a peer's write races in: every byte read once, in order") {
    for_each_loopback([&](const SocketAddr& lo, const std::size_t workers) {
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = workers});
        FileDescriptor peer = plain_connect(listener.local_address());
        TcpStream s = run(rt, listener.accept());

        std::mt19937 rng(static_cast<std::uint32_t>(workers * 7919 + (lo.is_v4() ? 0 : 1)));
        std::string sent;
        std::string received;
        int completed = 0;
        int cancelled = 0;
        std::atomic<int> send_failures{0};
        for (int round = 0; round < 200; ++round) {
            CAPTURE(round);
            const std::string chunk = std::to_string(round) + ";";  // distinct and in order
            const auto write_delay = std::chrono::microseconds(rng() % 300);
            const auto cancel_delay = std::chrono::microseconds(rng() % 300);
            const bool by_task = round % 2 == 1;
            std::atomic<bool> about_to_wait{false};
            std::stop_source stop;
            Started<std::optional<std::string>> pending(
                rt, by_task ? eddy::with_stop_token(read_once(s, {}, &about_to_wait), stop.get_token())
                            : read_once(s, stop.get_token(), &about_to_wait));
            std::thread writer([&] {
                if (!spin_until(about_to_wait)) return;
                std::this_thread::sleep_for(write_delay);
                if (!send_all(peer.get(), chunk)) send_failures.fetch_add(1);
            });
            CHECK(spin_until(about_to_wait));
            std::this_thread::sleep_for(cancel_delay);
            stop.request_stop();
            writer.join();
            const std::optional<std::string> got = pending.get();
            if (got.has_value()) {
                ++completed;
                CHECK_FALSE(got->empty());  // no end of stream here: a completed read has bytes
                received += *got;
            } else {
                ++cancelled;
            }
            sent += chunk;
            // What a cancelled read left in the socket (all of the chunk), or what a
            // completed one did not take yet, read now: the next round starts on a quiet
            // socket, so its read waits again.
            while (received.size() < sent.size()) {
                const std::optional<std::string> rest = run(rt, read_once(s));
                REQUIRE(rest.has_value());
                REQUIRE_FALSE(rest->empty());
                received += *rest;
            }
            if (!got.has_value()) CHECK(received.substr(received.size() - chunk.size()) == chunk);
        }
        CHECK(send_failures.load() == 0);
        CHECK(received.size() == sent.size());
        CHECK(received == sent);
        MESSAGE(lo.to_string() << ", " << workers << " worker(s): " << completed << " reads completed, "
                               << cancelled << " cancelled");
    });
}

// ---- 2. End of stream and the poll's life ------------------------------------------------

TEST_CASE("end of stream: the waiting read returns 0, every read after it 0, and the poll goes with the stream") {
    for_each_loopback([&](const SocketAddr& lo, const std::size_t workers) {
        for (const bool full_close : {false, true}) {  // shutdown(SHUT_WR), or close()
            CAPTURE(full_close);
            auto listener = TcpListener::bind(lo);
            Runtime rt(RuntimeConfig{.workers = workers});
            FileDescriptor peer = plain_connect(listener.local_address());
            std::optional<TcpStream> s(run(rt, listener.accept()));
            const std::size_t base = polled(rt);

            Started<std::size_t> pending(rt, read_count(*s));
            REQUIRE(wait_polled(rt, base + 1));  // waiting, with a poll armed
            CHECK_FALSE(pending.ready());
            if (full_close)
                peer.close();
            else
                REQUIRE(::shutdown(peer.get(), SHUT_WR) == 0);
            CHECK(pending.get() == 0);
            // End of stream stays: no event comes again, and no read waits for one.
            for (int i = 0; i < 5; ++i) CHECK(run(rt, read_count(*s)) == 0);
            // Several readers at once see it too.
            CHECK(run(rt, read_counts(*s, 4)) == std::vector<std::size_t>(4, 0));
            s.reset();  // closes the socket: its poll is cancelled
            CHECK(wait_polled(rt, base));
        }
    });
}

TEST_CASE("the last bytes and the FIN together: the short read that takes the bytes does not hide the end of stream") {
    for_each_loopback([&](const SocketAddr& lo, const std::size_t workers) {
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = workers});
        const std::size_t base = polled(rt);
        for (int round = 0; round < 50; ++round) {
            CAPTURE(round);
            FileDescriptor peer = plain_connect(listener.local_address());
            std::optional<TcpStream> s(run(rt, listener.accept()));
            // Even rounds: the reader waits first (a poll armed); odd rounds: bytes and FIN
            // are there before the first read.
            const bool waits = round % 2 == 0;
            // (A unique_ptr, not an optional: g++ 12 -O3 warns maybe-uninitialized on the latter.)
            std::unique_ptr<Started<std::string>> pending;
            if (waits) {
                pending = std::make_unique<Started<std::string>>(rt, eddy::test::read_to_end(*s));  // a 4 KiB buffer: 3 bytes is a short read
                REQUIRE(wait_polled(rt, base + 1));
            }
            REQUIRE(send_all(peer.get(), "xyz"));
            REQUIRE(::shutdown(peer.get(), SHUT_WR) == 0);
            if (!waits) pending = std::make_unique<Started<std::string>>(rt, eddy::test::read_to_end(*s));
            CHECK(pending->get() == "xyz");
            CHECK(run(rt, read_count(*s)) == 0);
            s.reset();
            REQUIRE(wait_polled(rt, base));  // this round's poll is gone
        }
    });
}

// ---- 3. A connection dropped mid-read ----------------------------------------------------

TEST_CASE("a peer closing (FIN) after random chunks with pauses: a 100-byte reader gets every byte, then 0") {
    for_each_loopback([&](const SocketAddr& lo, const std::size_t workers) {
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = workers});
        for (std::uint32_t round = 0; round < 6; ++round) {
            const std::uint32_t seed = round * 31 + static_cast<std::uint32_t>(workers) + (lo.is_v4() ? 0u : 1000u);
            CAPTURE(seed);
            std::mt19937 rng(seed);
            struct Chunk {
                std::size_t size;
                std::chrono::microseconds pause;
            };
            std::vector<Chunk> chunks(1 + rng() % 30);
            std::size_t total = 0;
            for (auto& c : chunks) {
                c.size = 1 + rng() % 4000;
                c.pause = std::chrono::microseconds(rng() % 3 == 0 ? 0 : rng() % 2000);
                total += c.size;
            }
            const std::string payload = as_string(eddy::test::pattern(total, seed + 1));
            FileDescriptor peer = plain_connect(listener.local_address());
            TcpStream s = run(rt, listener.accept());
            Started<std::string> reader(rt, read_all_with(s, 100));
            std::atomic<bool> send_failed{false};
            std::thread writer([&, fd = peer.release()] {
                std::size_t at = 0;
                for (const Chunk& c : chunks) {
                    if (!send_all(fd, std::string_view(payload).substr(at, c.size))) send_failed.store(true);
                    at += c.size;
                    std::this_thread::sleep_for(c.pause);
                }
                ::close(fd);  // FIN
            });
            writer.join();
            const std::string got = reader.get();
            CHECK_FALSE(send_failed.load());
            CHECK(got.size() == total);
            CHECK(got == payload);
        }
    });
}

namespace {

struct UntilEnd {
    std::string data;
    std::error_code error;  // empty: the stream ended with a 0-byte read
};

/// Reads with a 100-byte buffer until end of stream or an error.
Task<UntilEnd> read_until_end_or_error(TcpStream& s) {
    UntilEnd r;
    std::array<std::byte, 100> buf;
    try {
        for (;;) {
            const std::size_t n = co_await s.read(buf);
            if (n == 0) break;
            r.data += text(std::span(buf).first(n));
        }
    } catch (const std::system_error& e) {
        r.error = e.code();
    }
    co_return r;
}

} // namespace

TEST_CASE("a peer resetting (SO_LINGER 0) while the reader waits: a prefix of the bytes, then ECONNRESET or 0") {
    for_each_loopback([&](const SocketAddr& lo, const std::size_t workers) {
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = workers});
        int resets = 0;
        int ends = 0;
        int whole = 0;
        for (std::uint32_t round = 0; round < 20; ++round) {
            const std::uint32_t seed = round * 17 + static_cast<std::uint32_t>(workers) + (lo.is_v4() ? 0u : 1000u);
            CAPTURE(seed);
            std::mt19937 rng(seed);
            const std::size_t total = 1 + rng() % 20000;
            const std::size_t first = 1 + rng() % total;  // sent in two pieces
            const auto pause_before = std::chrono::microseconds(rng() % 2000);
            const auto pause_between = std::chrono::microseconds(rng() % 1000);
            const auto pause_after = std::chrono::microseconds(rng() % 3 == 0 ? 0 : rng() % 3000);
            const std::string payload = as_string(eddy::test::pattern(total, seed + 1));
            FileDescriptor peer = plain_connect(listener.local_address());
            TcpStream s = run(rt, listener.accept());
            Started<UntilEnd> reader(rt, read_until_end_or_error(s));
            std::atomic<bool> peer_failed{false};
            std::thread writer([&, fd = peer.release()] {
                std::this_thread::sleep_for(pause_before);
                const std::string_view p(payload);
                if (!send_all(fd, p.substr(0, first))) peer_failed.store(true);
                std::this_thread::sleep_for(pause_between);
                if (!send_all(fd, p.substr(first))) peer_failed.store(true);
                std::this_thread::sleep_for(pause_after);
                const linger l{1, 0};
                if (::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l) != 0) peer_failed.store(true);
                ::close(fd);  // RST
            });
            writer.join();
            const UntilEnd r = reader.get();
            CHECK_FALSE(peer_failed.load());
            CHECK(r.data.size() <= total);
            CHECK(r.data == payload.substr(0, r.data.size()));
            if (r.error) {
                CHECK(r.error == std::errc::connection_reset);
                ++resets;
            } else {
                ++ends;
            }
            if (r.data.size() == total) ++whole;
        }
        MESSAGE(lo.to_string() << ", " << workers << " worker(s): " << resets << " ended with ECONNRESET, " << ends
                               << " with 0; " << whole << " of 20 got every byte");
    });
}

// ---- 4. close() from another task while tasks wait ---------------------------------------

TEST_CASE("close() from another task ends a write_all waiting on a full socket with EPIPE") {
    const std::vector<std::byte> payload = eddy::test::pattern(std::size_t{4} << 20);
    for_each_loopback([&](const SocketAddr& lo, const std::size_t workers) {
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = workers});
        FileDescriptor peer = plain_connect(listener.local_address(), 4096);  // never reads until the end
        TcpStream s = run(rt, listener.accept());
        eddy::test::set_int_sockopt(s.native_handle(), SOL_SOCKET, SO_SNDBUF, 4096);
        const std::size_t base = polled(rt);

        Started<std::error_code> writer(rt, error_of(write_all_task(s, payload)));
        REQUIRE(wait_polled(rt, base + 1));  // 4 MiB do not fit: write_all waits for room
        CHECK_FALSE(writer.ready());
        run(rt, close_stream(s));
        CHECK(writer.get() == std::errc::broken_pipe);
        CHECK(s.native_handle() == -1);
        CHECK(wait_polled(rt, base));

        // The peer reads what was sent before the close, in order, then end of stream.
        std::string got;
        std::array<char, 4096> buf;
        for (;;) {
            const ssize_t n = ::recv(peer.get(), buf.data(), buf.size(), 0);
            if (n < 0 && errno == EINTR) continue;
            REQUIRE(n >= 0);
            if (n == 0) break;
            got.append(buf.data(), static_cast<std::size_t>(n));
        }
        CHECK(got.size() < payload.size());
        CHECK(got == text(std::span(payload).first(got.size())));
    });
}

TEST_CASE("close() while a read and a write_all wait on the same stream: the read returns 0, the write fails with EPIPE") {
    const std::vector<std::byte> payload = eddy::test::pattern(std::size_t{4} << 20);
    for_each_loopback([&](const SocketAddr& lo, const std::size_t workers) {
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = workers});
        FileDescriptor peer = plain_connect(listener.local_address(), 4096);  // never writes nor reads
        TcpStream s = run(rt, listener.accept());
        eddy::test::set_int_sockopt(s.native_handle(), SOL_SOCKET, SO_SNDBUF, 4096);
        const std::size_t base = polled(rt);

        Started<std::size_t> reader(rt, read_count(s));
        REQUIRE(wait_polled(rt, base + 1));  // the read waits
        std::atomic<bool> writing{false};
        Started<std::error_code> writer(rt, error_of(write_all_task(s, payload, &writing)));
        REQUIRE(spin_until(writing));
        quiesce(rt, workers);  // the write_all has filled the socket and waits too
        CHECK_FALSE(reader.ready());
        CHECK_FALSE(writer.ready());
        run(rt, close_stream(s));
        CHECK(reader.get() == 0);
        CHECK(writer.get() == std::errc::broken_pipe);
        CHECK(wait_polled(rt, base));
    });
}

TEST_CASE("close() from another task ends every accept waiting on the listener with EINVAL") {
    for_each_loopback([&](const SocketAddr& lo, const std::size_t workers) {
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = workers});
        const std::size_t base = polled(rt);
        std::vector<Started<std::error_code>> acceptors;
        acceptors.emplace_back(rt, error_of(listener.accept()));
        REQUIRE(wait_polled(rt, base + 1));
        acceptors.emplace_back(rt, error_of(listener.accept()));
        acceptors.emplace_back(rt, error_of(listener.accept_with_address()));
        quiesce(rt, workers);  // all three wait
        for (auto& a : acceptors) CHECK_FALSE(a.ready());
        run(rt, close_listener(listener));
        for (auto& a : acceptors) CHECK(a.get() == std::errc::invalid_argument);
        CHECK(wait_polled(rt, base));
        CHECK(listener.native_handle() == -1);
    });
}

// ---- The first wait of a socket, in two tasks at once ------------------------------------

namespace {

/// Two tasks that meet (both run at once, on the two workers), then start their operations:
/// the test waits until `passed` reads 2 before it quiesces (a quiesce task must not take a
/// worker from a task still waiting to meet the other).
struct Together {
    std::atomic<int> met{0};
    std::atomic<int> passed{0};
    void wait_passed() const {
        const auto deadline = Clock::now() + kDeadline;
        while (passed.load() < 2 && !past(deadline)) std::this_thread::yield();
        REQUIRE(passed.load() == 2);
    }
};
Task<void> meet(Together& t) {
    const std::optional<std::size_t> w = co_await eddy::test::rendezvous(t.met, 2);
    CHECK(w.has_value());
    t.passed.fetch_add(1);
}
Task<std::error_code> accept_together(TcpListener& l, Together& t) {
    co_await meet(t);
    co_return co_await error_of(l.accept());
}
Task<std::pair<std::size_t, std::error_code>> read_together(TcpStream& s, Together& t) {
    co_await meet(t);
    try {
        co_return std::pair{co_await read_count(s), std::error_code{}};
    } catch (const std::system_error& e) {
        co_return std::pair{std::size_t{0}, e.code()};
    }
}
Task<std::error_code> write_together(TcpStream& s, std::span<const std::byte> data, Together& t) {
    co_await meet(t);
    co_return co_await error_of(write_all_task(s, data));
}

/// Waits until the gauge reads at least `n`, gives the reactor 50 ms more, and returns it.
std::size_t settled_polled(const Runtime& rt, std::size_t n) {
    const auto deadline = Clock::now() + kDeadline;
    while (polled(rt) < n && !past(deadline)) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(50ms);
    return polled(rt);
}

} // namespace

TEST_CASE("two tasks whose first operation on a socket waits at the same moment share the socket's one poll") {
    // Two workers: the two tasks run at once. (The socket's poll state is made by the first
    // operation that has to wait; two of them must not make two.)
    const std::vector<std::byte> payload = eddy::test::pattern(std::size_t{4} << 20);
    for (const SocketAddr& lo : loopbacks()) {
        CAPTURE(lo.to_string());
        for (int round = 0; round < 10; ++round) {
            CAPTURE(round);
            auto listener = TcpListener::bind(lo);
            Runtime rt(RuntimeConfig{.workers = 2});
            bool ok = true;
            {
                // Two accepts on a fresh listener; close() then ends both with EINVAL.
                const std::size_t base = polled(rt);
                Together t;
                Started<std::error_code> a(rt, accept_together(listener, t));
                Started<std::error_code> b(rt, accept_together(listener, t));
                t.wait_passed();
                quiesce(rt, 2);
                const std::size_t polls = settled_polled(rt, base + 1);
                CHECK(polls == base + 1);
                run(rt, close_listener(listener));
                const std::error_code ea = a.get();
                const std::error_code eb = b.get();
                CHECK(ea == std::errc::invalid_argument);
                CHECK(eb == std::errc::invalid_argument);
                const bool back = wait_polled(rt, base, 5s);
                CHECK(back);
                ok = ok && polls == base + 1 && ea == std::errc::invalid_argument && eb == std::errc::invalid_argument && back;
            }
            {
                // A read and a write_all on a fresh stream whose send buffer is full.
                auto l2 = TcpListener::bind(lo);
                FileDescriptor peer = plain_connect(l2.local_address(), 4096);
                TcpStream s = run(rt, l2.accept());
                eddy::test::set_int_sockopt(s.native_handle(), SOL_SOCKET, SO_SNDBUF, 4096);
                std::array<std::byte, 1024> fill{};
                while (::send(s.native_handle(), fill.data(), fill.size(), MSG_DONTWAIT | MSG_NOSIGNAL) > 0) {
                }
                const std::size_t base = polled(rt);
                Together t;
                Started<std::pair<std::size_t, std::error_code>> reader(rt, read_together(s, t));
                Started<std::error_code> writer(rt, write_together(s, payload, t));
                t.wait_passed();
                quiesce(rt, 2);
                const std::size_t polls = settled_polled(rt, base + 1);
                CHECK(polls == base + 1);
                run(rt, close_stream(s));
                const auto [n, er] = reader.get();
                const std::error_code ew = writer.get();
                CHECK(n == 0);
                CHECK(er == std::error_code{});
                CHECK(ew == std::errc::broken_pipe);
                const bool back = wait_polled(rt, base, 5s);
                CHECK(back);
                ok = ok && polls == base + 1 && n == 0 && !er && ew == std::errc::broken_pipe && back;
            }
            if (!ok) break;  // one failing round says it all (each failure waits kDeadline for the gauge)
        }
    }
}

// ---- 5. Several acceptors on one listener -------------------------------------------------

namespace {

constexpr int kClients = 100;

struct Accepted {
    std::vector<TcpStream> streams;
    bool cancelled = false;
    int bad_ids = 0;
};

/// Accepts until cancelled; reads each connection's 4-byte id and counts it in `seen`.
Task<Accepted> acceptor(TcpListener& listener, std::stop_token stop, std::array<std::atomic<int>, kClients>& seen,
                        std::atomic<int>& accepted) {
    Accepted r;
    try {
        for (;;) {
            TcpStream s = co_await listener.accept(stop);
            std::array<std::byte, 4> raw;
            co_await s.read_exact(raw);
            std::uint32_t id = 0;
            std::memcpy(&id, raw.data(), sizeof id);
            if (id < static_cast<std::uint32_t>(kClients))
                seen[id].fetch_add(1);
            else
                ++r.bad_ids;
            r.streams.push_back(std::move(s));
            accepted.fetch_add(1);
        }
    } catch (const OperationCancelled&) {
        r.cancelled = true;
    }
    co_return r;
}

} // namespace

TEST_CASE("four tasks accepting on one listener: 100 connections each accepted once, all stopped by one stop_source") {
    for_each_loopback([&](const SocketAddr& lo, const std::size_t workers) {
        const std::size_t fds_before = open_fds();
        {
            auto listener = TcpListener::bind(lo);
            const SocketAddr addr = listener.local_address();
            std::array<std::atomic<int>, kClients> seen{};
            std::atomic<int> accepted{0};
            Runtime rt(RuntimeConfig{.workers = workers});
            std::stop_source stop;
            std::vector<Started<Accepted>> acceptors;
            const std::size_t base = polled(rt);
            for (int i = 0; i < 4; ++i) acceptors.emplace_back(rt, acceptor(listener, stop.get_token(), seen, accepted));
            quiesce(rt, workers);
            CHECK(settled_polled(rt, base + 1) == base + 1);  // one poll for the listener, however many wait

            // Four plain threads connect 25 clients each and send their ids.
            std::vector<FileDescriptor> clients(kClients);
            std::atomic<int> client_failures{0};
            std::vector<std::thread> threads;
            for (int t = 0; t < 4; ++t) {
                threads.emplace_back([&, t] {
                    for (int i = t; i < kClients; i += 4) {
                        FileDescriptor fd(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
                        if (fd.get() < 0 || connect_blocking(fd.get(), addr) != 0) {
                            client_failures.fetch_add(1);
                            continue;
                        }
                        const auto id = static_cast<std::uint32_t>(i);
                        std::array<std::byte, 4> raw;
                        std::memcpy(raw.data(), &id, sizeof id);
                        if (!send_all(fd.get(), raw)) client_failures.fetch_add(1);
                        clients[static_cast<std::size_t>(i)] = std::move(fd);
                    }
                });
            }
            for (auto& th : threads) th.join();
            REQUIRE(client_failures.load() == 0);

            const auto deadline = Clock::now() + kDeadline;
            while (accepted.load() < kClients && !past(deadline)) std::this_thread::sleep_for(1ms);
            CHECK(accepted.load() == kClients);
            stop.request_stop();  // from this plain thread: every acceptor waits in accept
            std::size_t streams = 0;
            int bad_ids = 0;
            for (auto& a : acceptors) {
                Accepted r = a.get();
                CHECK(r.cancelled);
                streams += r.streams.size();
                bad_ids += r.bad_ids;
            }
            CHECK(streams == static_cast<std::size_t>(kClients));
            CHECK(bad_ids == 0);
            for (int i = 0; i < kClients; ++i) {
                CAPTURE(i);
                CHECK(seen[static_cast<std::size_t>(i)].load() == 1);
            }
            // Nothing more was accepted after the stop: the backlog is empty.
            CHECK(accepted.load() == kClients);
        }  // clients, the accepted streams (in the results), the listener and the runtime close
        CHECK(open_fds() == fds_before);
    });
}

// ---- 6. A completion while a worker is busy ----------------------------------------------

namespace {

/// Computes for `d` without suspending; returns when it finished.
Task<Clock::time_point> compute(std::chrono::milliseconds d, std::atomic<bool>& started) {
    started.store(true);
    const auto end = Clock::now() + d;
    std::uint64_t x = 1;
    while (Clock::now() < end) x = x * 6364136223846793005u + 1442695040888963407u;
    volatile std::uint64_t sink = x;
    (void)sink;
    co_return Clock::now();
}

struct Reply {
    std::string data;
    Clock::time_point at;
};

Task<Reply> read_ping(TcpStream& s) {
    Reply r;
    r.data = co_await read_exact_text(s, 4);
    r.at = Clock::now();
    co_return r;
}

} // namespace

TEST_CASE("a read completion is run by the idle worker while the other computes for 300 ms; with one worker, after it") {
    for_each_loopback({2, 1}, [&](const SocketAddr& lo, const std::size_t workers) {
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = workers});
        FileDescriptor peer = plain_connect(listener.local_address());
        TcpStream s = run(rt, listener.accept());
        const std::size_t base = polled(rt);

        Started<Reply> reader(rt, read_ping(s));
        REQUIRE(wait_polled(rt, base + 1));  // waiting
        std::atomic<bool> computing{false};
        Started<Clock::time_point> busy(rt, compute(300ms, computing));
        REQUIRE(spin_until(computing));
        std::atomic<bool> send_failed{false};
        std::thread writer([&] {
            std::this_thread::sleep_for(20ms);
            if (!send_all(peer.get(), "ping")) send_failed.store(true);
        });
        writer.join();
        const Reply r = reader.get();
        const Clock::time_point computed = busy.get();
        CHECK_FALSE(send_failed.load());
        CHECK(r.data == "ping");
        if (workers == 2)
            CHECK(r.at < computed);  // the idle worker ran it: no waiting for the computation
        else
            CHECK(r.at >= computed);  // the only worker was busy: it ran the read afterwards
    });
}

// ---- 7. Many readers woken at once --------------------------------------------------------

namespace {

std::string message(int conn, int round) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "conn %02d round %d|", conn, round);
    return buf;
}

Task<std::vector<std::string>> read_messages(std::vector<TcpStream>& streams, int round) {
    std::vector<Task<std::string>> readers;
    for (std::size_t i = 0; i < streams.size(); ++i)
        readers.push_back(read_exact_text(streams[i], message(static_cast<int>(i), round).size()));
    co_return co_await eddy::when_all(std::move(readers));
}

} // namespace

TEST_CASE("64 readers waiting on 64 connections are all woken by a peer writing to every one at once") {
    constexpr int kConns = 64;
    for_each_loopback([&](const SocketAddr& lo, const std::size_t workers) {
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = workers});
        std::vector<FileDescriptor> peers;
        std::vector<TcpStream> streams;
        for (int i = 0; i < kConns; ++i) {
            peers.push_back(plain_connect(listener.local_address()));
            streams.push_back(run(rt, listener.accept()));
        }
        const std::size_t base = polled(rt);
        for (int round = 0; round < 3; ++round) {
            CAPTURE(round);
            Started<std::vector<std::string>> all(rt, read_messages(streams, round));
            // The first round: every reader queued itself (one poll per socket). Later
            // rounds reuse the armed polls; they wait (almost always) after the quiesce.
            if (round == 0) REQUIRE(wait_polled(rt, base + kConns));
            quiesce(rt, workers);
            CHECK_FALSE(all.ready());
            std::atomic<int> send_failures{0};
            std::thread writer([&] {
                for (int i = 0; i < kConns; ++i)
                    if (!send_all(peers[static_cast<std::size_t>(i)].get(), message(i, round))) send_failures.fetch_add(1);
            });
            writer.join();
            const std::vector<std::string> got = all.get();
            CHECK(send_failures.load() == 0);
            REQUIRE(got.size() == static_cast<std::size_t>(kConns));
            for (int i = 0; i < kConns; ++i) {
                CAPTURE(i);
                CHECK(got[static_cast<std::size_t>(i)] == message(i, round));
            }
            CHECK(polled(rt) == base + kConns);  // one poll per socket, armed once for its life
        }
        streams.clear();
        CHECK(wait_polled(rt, base));
    });
}
