// tests/stress/io_stress_test.cpp: the io_uring reactor under load, through the public API.
//
// Four cases, each run for several rounds with a fresh Runtime per round, 2 to 4 workers,
// and in two rounds of three a tiny ring (RuntimeConfig::ring_entries 4 or 8: the CQ is then
// 16 or 32 entries), so the full-SQ and CQ-overflow paths of the reactor run all the time:
//   1. pipe ping-pong and TCP echo (accept and connect through the reactor too), many
//      streams at once, message sizes from 1 byte to well over a pipe's capacity, echo
//      buffers from a few bytes to 64 KiB; a third of the pipe ends are non-blocking (the
//      reactor's poll-then-retry path);
//   2. random cancellation: writers and readers on pipes and TCP sockets whose every
//      operation carries a fresh std::stop_token, stopped at random by other tasks, by a
//      plain thread, and (one operation in eight) by a task that sleeps for about the
//      operation's duration first, so stops race completions;
//   3. thousands of short sleeps (0-3 ms, sleep and sleep_until), a third cancellable and
//      half of those stopped after a random 0-3 ms, interleaved with pipe round trips and
//      TCP echo traffic;
//   4. the Runtime shut down or destroyed while all of the above is in flight (at once, or
//      after some progress), with the plain-thread canceller still running.
//
// Accounting is exact. Every byte of every stream is a function of (stream, offset)
// (stream_byte), so a lost, repeated, reordered or misrouted byte shows up as a mismatch at
// the reader, and each reader must see exactly what its writer wrote, then end of stream.
// A cancelled read must leave its buffer untouched (the bytes stay in the pipe or socket
// for the next read); a cancelled write is retried, so a write that reported
// operation_canceled after writing would show up as repeated bytes. A sleep that completes
// must not be early, one that was stopped ends either way, and every sleep resumes. Every
// task takes an eddy::test::Counted, so `alive() == 0` after the round proves that every
// frame was destroyed. In case 4 every JoinHandle must report a result or RuntimeStopped,
// and the process must have as many descriptors open as before the round (every socket
// and pipe closed with its frame); LeakSanitizer covers memory in the ASan build.
//
// Hangs: a Watchdog per round ends the process with the case, round, seed and the round's
// counters if the round has not finished within a very coarse limit (a lost wake-up or a
// lost completion then fails by name instead of as a meson timeout). With
// EDDY_STRESS_HANG_PAUSE=1 in the environment it prints the pid and waits instead, so gdb
// can be attached.
//
// Knobs (environment): EDDY_STRESS_ROUNDS=N runs N rounds of every case (the defaults are
// sized for the TSan build on 2 cores); EDDY_STRESS_SEED=S changes the workload (message
// sizes, chunking, which operations are cancellable and when they are stopped, timer
// durations); EDDY_STRESS_WORKERS=W[,W...] replaces the rounds' worker counts
// (tests/support/stress_env.hpp). A failure names the seed and round: rerun with the same
// EDDY_STRESS_SEED and at least that many rounds.
#include <eddy/io/file_descriptor.hpp>
#include <eddy/io/pipe.hpp>
#include <eddy/io/read_write.hpp>
#include <eddy/time/sleep.hpp>
#include <eddy/net/socket_addr.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/net/tcp_stream.hpp>
#include <eddy/runtime/config.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/counted.hpp"
#include "support/io_helpers.hpp"
#include "support/stress_env.hpp"
#include "support/watchdog.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

using eddy::JoinHandle;
using eddy::Task;
using eddy::test::Counted;
using eddy::test::LifetimeCounter;
using eddy::test::Outcome;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

// ---- Sizes and knobs ---------------------------------------------------------------------

// Rounds per case (EDDY_STRESS_ROUNDS overrides all four) and sizes per round. Measured on
// the 2-core machine: about 16 s for the whole file in the TSan build, 15 s with ASan+UBSan,
// 13 s in a release build (which does more work per round: case 2 runs for a fixed time per
// round, the others for a fixed amount of work).
#ifdef EDDY_TEST_TSAN
constexpr int kEchoRounds = 9;
constexpr int kCancelRounds = 9;
constexpr int kTimerRounds = 9;
constexpr int kShutdownRounds = 60;
constexpr int kEchoStreams = 8;          // per kind (pipe pairs, TCP connections)
constexpr int kEchoMessages = 40;        // per stream
constexpr int kCancelStreams = 4;        // per kind
constexpr auto kCancelTraffic = 1000ms;  // per round
constexpr int kSleepers = 600;
constexpr int kSleepsEach = 20;
#else
constexpr int kEchoRounds = 18;
constexpr int kCancelRounds = 18;
constexpr int kTimerRounds = 18;
constexpr int kShutdownRounds = 60;
constexpr int kEchoStreams = 8;
constexpr int kEchoMessages = 60;
constexpr int kCancelStreams = 6;
constexpr auto kCancelTraffic = 400ms;
constexpr int kSleepers = 600;
constexpr int kSleepsEach = 25;
#endif
constexpr int kConnectionsPerConnector = 100;    // case 2, per round
constexpr std::size_t kMaxMessage = 160 * 1024;  // more than a pipe holds (64 KiB)
constexpr std::size_t kMaxChunk = 8 * 1024;      // reader buffers and writer chunks in case 2
constexpr std::chrono::seconds kWatchdogLimit = std::chrono::minutes(3);

int env_int(const char* name, int fallback) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return fallback;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end != '\0' || n < 1 || n > 1'000'000)
        throw std::invalid_argument(std::string(name) + " must be a count >= 1");
    return static_cast<int>(n);
}

int rounds(int fallback) { return env_int("EDDY_STRESS_ROUNDS", fallback); }

std::uint64_t base_seed() {
    const char* v = std::getenv("EDDY_STRESS_SEED");
    if (v == nullptr || *v == '\0') return 20240611;
    return std::strtoull(v, nullptr, 0);
}

/// The configurations the rounds cycle through: worker count (EDDY_STRESS_WORKERS overrides) and SQ size.
struct Config {
    std::size_t workers;
    unsigned ring_entries;
};
constexpr Config kConfigs[] = {{2, 4}, {4, 8}, {3, 1024}, {4, 4}, {2, 8}, {3, 4}, {2, 1024}, {4, 1024}, {3, 8}};

// ---- Randomness and payloads ---------------------------------------------------------------

/// splitmix64: small enough to live in every frame.
struct Rng {
    std::uint64_t s;
    std::uint64_t next() noexcept {
        std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    std::size_t below(std::size_t n) noexcept { return static_cast<std::size_t>(next() % n); }
    bool one_in(std::size_t n) noexcept { return below(n) == 0; }
};

std::uint64_t mix(std::uint64_t a, std::uint64_t b) noexcept { return Rng{a * 0x2545F4914F6CDD1Dull ^ b}.next(); }

/// Byte `pos` of stream `stream`: not periodic at any small period, different per stream.
std::byte stream_byte(std::uint64_t stream, std::uint64_t pos) noexcept {
    const std::uint64_t word = mix(stream, pos / 8);
    return static_cast<std::byte>(word >> (8 * (pos % 8)));
}

void fill_stream(std::span<std::byte> out, std::uint64_t stream, std::uint64_t pos) noexcept {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = stream_byte(stream, pos + i);
}

/// True if `got` is bytes [pos, pos + got.size()) of `stream`.
bool matches_stream(std::span<const std::byte> got, std::uint64_t stream, std::uint64_t pos) noexcept {
    for (std::size_t i = 0; i < got.size(); ++i)
        if (got[i] != stream_byte(stream, pos + i)) return false;
    return true;
}

/// Mixed sizes: single bytes, small, medium, and larger than a pipe's buffer.
std::size_t message_size(Rng& r, std::size_t max = kMaxMessage) {
    switch (r.below(8)) {
    case 0:
        return 1;
    case 1:
    case 2:
        return 1 + r.below(64);
    case 3:
    case 4:
        return 64 + r.below(4096);
    case 5:
    case 6:
        return 4096 + r.below(32 * 1024);
    default:
        return 32 * 1024 + r.below(max - 32 * 1024);
    }
}

// ---- Bookkeeping ---------------------------------------------------------------------------

/// Unexpected events (mismatches, unexpected exceptions), with the first few described.
class Problems {
public:
    void add(std::string what) {
        std::lock_guard lock(mutex_);
        if (list_.size() < 20) list_.push_back(std::move(what));
        ++count_;
    }
    long count() const {
        std::lock_guard lock(mutex_);
        return count_;
    }
    std::string describe() const {
        std::lock_guard lock(mutex_);
        std::string s;
        for (const auto& p : list_) s += "\n  " + p;
        return s;
    }

private:
    mutable std::mutex mutex_;
    std::vector<std::string> list_;  // guarded by mutex_
    long count_ = 0;                 // guarded by mutex_
};

/// Everything a round's tasks report to. Declared before the Runtime, so it outlives it.
struct Ctx {
    explicit Ctx(std::uint64_t seed) : seed(seed) {}
    const std::uint64_t seed;
    LifetimeCounter frames;
    Problems problems;
    std::atomic<long> tasks_done{0};     // tasks that ran to their end
    std::atomic<long> bytes_sent{0};     // by the stream writers (case 1: the pingers)
    std::atomic<long> bytes_echoed{0};   // by the echo servers
    std::atomic<long> bytes_checked{0};  // verified by the readers
    std::atomic<long> messages{0};
    std::atomic<long> reads_canceled{0};
    std::atomic<long> writes_canceled{0};
    std::atomic<long> accepts_canceled{0};
    std::atomic<long> connections{0};  // accepted and their id read
    std::atomic<long> cancel_requests{0};  // request_stop() calls that were the first on their source
    std::atomic<long> sleeps_done{0};
    std::atomic<long> sleeps_canceled{0};
    std::atomic<long> sleeps_early{0};
    std::atomic<long> progress{0};       // anything finished (case 4 waits on it)
    std::atomic<long> unhandled_stopped{0};
    std::atomic<long> unhandled_other{0};
    std::atomic<bool> stop_cancellers{false};
    std::atomic<bool> stop_writers{false};
    std::atomic<long> spawn_refused{0};  // RuntimeStopped from eddy::spawn (case 4 only)

    Counted life() { return Counted(frames); }

    /// A task ended with an exception: a problem, unless it is RuntimeStopped from an
    /// eddy::spawn racing shutdown (case 4), which is only counted.
    void failed(const std::string& who, const std::exception& e) {
        if (dynamic_cast<const eddy::RuntimeStopped*>(&e) != nullptr) {
            spawn_refused.fetch_add(1);
            return;
        }
        problems.add(who + ": " + e.what());
    }

    std::string status() const {
        return "tasks_done=" + std::to_string(tasks_done.load()) + " bytes_sent=" + std::to_string(bytes_sent.load()) +
               " bytes_echoed=" + std::to_string(bytes_echoed.load()) +
               " bytes_checked=" + std::to_string(bytes_checked.load()) +
               " messages=" + std::to_string(messages.load()) +
               " reads_canceled=" + std::to_string(reads_canceled.load()) +
               " writes_canceled=" + std::to_string(writes_canceled.load()) +
               " accepts_canceled=" + std::to_string(accepts_canceled.load()) +
               " connections=" + std::to_string(connections.load()) +
               " cancel_requests=" + std::to_string(cancel_requests.load()) +
               " sleeps_done=" + std::to_string(sleeps_done.load()) +
               " sleeps_canceled=" + std::to_string(sleeps_canceled.load()) +
               " frames_alive=" + std::to_string(frames.alive()) + " problems=" + std::to_string(problems.count());
    }
};

eddy::RuntimeConfig config_for(Ctx& ctx, const Config& c) {
    return eddy::RuntimeConfig{
        .workers = c.workers,
        .ring_entries = c.ring_entries,
        .on_unhandled_exception =
            [&ctx](std::exception_ptr e) {
                try {
                    std::rethrow_exception(e);
                } catch (const eddy::RuntimeStopped&) {
                    ctx.unhandled_stopped.fetch_add(1);
                } catch (const std::exception& ex) {
                    ctx.unhandled_other.fetch_add(1);
                    ctx.problems.add(std::string("unhandled exception: ") + ex.what());
                } catch (...) {
                    ctx.unhandled_other.fetch_add(1);
                    ctx.problems.add("unhandled exception of an unknown type");
                }
            },
    };
}

/// The descriptors open in this process, each with what it is ("socket:[1234] 127.0.0.1:5
/// <- 127.0.0.1:6" for a connected socket), to name a leaked one.
std::map<int, std::string> open_fds() {
    std::map<int, std::string> fds;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
        const int fd = std::atoi(e.path().filename().c_str());
        std::error_code ec;
        std::string what = std::filesystem::read_symlink(e.path(), ec).string();
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0 && ss.ss_family == AF_INET) {
            what += " " + eddy::net::SocketAddr::from_native(reinterpret_cast<sockaddr*>(&ss), len).to_string();
            len = sizeof ss;
            if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0)
                what += " <- " + eddy::net::SocketAddr::from_native(reinterpret_cast<sockaddr*>(&ss), len).to_string();
        }
        fds.emplace(fd, std::move(what));
    }
    return fds;
}

/// The descriptors open in `after` but not in `before`, described; empty if none.
std::string new_fds(const std::map<int, std::string>& before, const std::map<int, std::string>& after) {
    std::string s;
    for (const auto& [fd, what] : after)
        if (!before.contains(fd)) s += "\n  fd " + std::to_string(fd) + ": " + what;
    return s;
}

/// Runs body(ctx, config, round) for every round under a Watchdog, with the seed captured.
template <class Body>
void for_each_round(const char* name, int case_id, int default_rounds, Body body) {
    const int n = rounds(default_rounds);
    const std::uint64_t base = base_seed();
    for (int round = 0; round < n; ++round) {
        Config config = kConfigs[static_cast<std::size_t>(round) % std::size(kConfigs)];
        config.workers = eddy::test::stress_workers(config.workers, round);
        const std::uint64_t seed = mix(base + static_cast<std::uint64_t>(case_id), static_cast<std::uint64_t>(round));
        CAPTURE(base);
        CAPTURE(round);
        CAPTURE(seed);
        CAPTURE(config.workers);
        CAPTURE(config.ring_entries);
        const auto fds_before = open_fds();
        Ctx ctx(seed);
        {
            eddy::test::Watchdog watchdog(
                "io_stress",
                std::string(name) + ", EDDY_STRESS_SEED=" + std::to_string(base) + " round " + std::to_string(round) +
                    " (" + std::to_string(config.workers) + " workers, " + std::to_string(config.ring_entries) +
                    " ring entries)",
                kWatchdogLimit, [&ctx] { return ctx.status(); });
            body(ctx, config, round);
        }
        INFO("problems:" << ctx.problems.describe());
        CHECK(ctx.problems.count() == 0);
        CHECK(ctx.unhandled_other.load() == 0);
        CHECK(ctx.frames.alive() == 0);
        // Every socket and pipe was closed with its frame: as many descriptors as before
        // (the one that lists /proc/self/fd has the same number both times).
        const auto fds_after = open_fds();
        INFO("descriptors left open:" << new_fds(fds_before, fds_after));
        CHECK(fds_after.size() == fds_before.size());
    }
}

// ---- Byte streams: a pipe pair or a TCP socket --------------------------------------------

/// One side of a bidirectional byte stream: two pipe ends, or a connected TCP socket.
struct Duplex {
    eddy::io::FileDescriptor rd;  // pipes
    eddy::io::FileDescriptor wr;
    std::optional<eddy::net::TcpStream> sock;  // or a socket

    // Tasks: a socket's awaiter (readiness-based) and a descriptor's (one io_uring
    // operation) are different types.
    Task<std::size_t> read(std::span<std::byte> b, std::stop_token t = {}) {
        if (sock) co_return co_await sock->read(b, std::move(t));
        co_return co_await eddy::io::read(rd.get(), b, std::move(t));
    }
    Task<std::size_t> write(std::span<const std::byte> b, std::stop_token t = {}) {
        if (sock) co_return co_await sock->write(b, std::move(t));
        co_return co_await eddy::io::write(wr.get(), b, std::move(t));
    }
    /// The peer reads end of stream once it has everything written before.
    void close_write() {
        if (sock)
            sock->shutdown(eddy::net::TcpStream::Shutdown::kWrite);
        else
            wr.close();
    }
};

/// Two connected Duplexes over two pipes; either or both directions non-blocking (a
/// non-blocking descriptor that is not ready takes the reactor's poll-then-retry path).
std::pair<Duplex, Duplex> pipe_duplex(Rng& r) {
    auto ab = eddy::io::pipe();
    auto ba = eddy::io::pipe();
    for (int fd : {ab.read_end.get(), ab.write_end.get(), ba.read_end.get(), ba.write_end.get()})
        if (r.one_in(3)) REQUIRE(::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK) == 0);
    Duplex a, b;
    a.rd = std::move(ba.read_end);
    a.wr = std::move(ab.write_end);
    b.rd = std::move(ab.read_end);
    b.wr = std::move(ba.write_end);
    return {std::move(a), std::move(b)};
}

/// A TCP connection over loopback made with plain blocking calls from this thread. Half get
/// tiny send buffers, so that writes block (and go to the reactor) often.
std::pair<Duplex, Duplex> tcp_duplex(eddy::net::TcpListener& listener, Rng& r) {
    const auto addr = listener.local_address();
    eddy::io::FileDescriptor c(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
    REQUIRE(c);
    REQUIRE(::connect(c.get(), addr.native(), addr.native_size()) == 0);
    eddy::io::FileDescriptor s(::accept4(listener.native_handle(), nullptr, nullptr, SOCK_CLOEXEC));
    REQUIRE(s);
    if (r.one_in(2)) {
        // Only the send buffers: tiny receive windows make loopback TCP crawl (delayed ACKs).
        const int small = 4096;
        for (int fd : {c.get(), s.get()}) REQUIRE(::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small) == 0);
    }
    Duplex a, b;
    a.sock.emplace(std::move(c));
    b.sock.emplace(std::move(s));
    a.sock->set_nodelay(true);
    b.sock->set_nodelay(true);
    return {std::move(a), std::move(b)};
}

// ---- Case 1: ping-pong and echo ------------------------------------------------------------

/// A stream's plan: its message sizes and its echoer's buffer. One stream in four echoes
/// through a buffer of a few bytes (many small operations); its messages are small, too.
struct EchoPlan {
    std::vector<std::size_t> sizes;
    std::size_t echo_buffer;
};

EchoPlan plan_stream(Rng& r, int messages) {
    EchoPlan p;
    const bool tiny = r.one_in(4);
    for (int i = 0; i < messages; ++i) p.sizes.push_back(tiny ? 1 + r.below(256) : message_size(r));
    p.echo_buffer = tiny ? 1 + r.below(16) : 256 + r.below(64 * 1024);
    return p;
}

/// Writes bytes [pos, pos + n) of `stream` in random chunks (each write may be short too).
Task<void> send_part(Ctx& ctx, Duplex& d, std::uint64_t stream, std::uint64_t pos, std::size_t n, Rng r) {
    std::vector<std::byte> chunk;
    while (n > 0) {
        const std::size_t len = std::min(n, message_size(r));
        chunk.resize(len);
        fill_stream(chunk, stream, pos);
        std::span<const std::byte> left(chunk);
        while (!left.empty()) {
            const std::size_t w = co_await d.write(left);
            if (w == 0 || w > left.size()) {
                ctx.problems.add("stream " + std::to_string(stream) + ": write returned " + std::to_string(w));
                co_return;
            }
            left = left.subspan(w);
            ctx.bytes_sent.fetch_add(static_cast<long>(w));
        }
        pos += len;
        n -= len;
    }
}

/// Reads exactly n bytes with random buffer sizes, checking each against the stream.
Task<void> receive_part(Ctx& ctx, Duplex& d, std::uint64_t stream, std::uint64_t pos, std::size_t n, Rng r) {
    std::vector<std::byte> buf;
    while (n > 0) {
        buf.resize(std::min(n, message_size(r)));
        const std::size_t got = co_await d.read(buf);
        if (got == 0 || got > buf.size()) {
            ctx.problems.add("stream " + std::to_string(stream) + ": read returned " + std::to_string(got) + " with " +
                             std::to_string(n) + " bytes outstanding at offset " + std::to_string(pos));
            co_return;
        }
        if (!matches_stream(std::span(buf).first(got), stream, pos)) {
            ctx.problems.add("stream " + std::to_string(stream) + ": wrong bytes at offset " + std::to_string(pos));
            co_return;
        }
        ctx.bytes_checked.fetch_add(static_cast<long>(got));
        pos += got;
        n -= got;
    }
}

/// Sends each message and reads its echo back before the next one (both halves at once:
/// a message larger than the pipe or socket buffers needs the reader running).
Task<void> pinger(Ctx& ctx, Counted, Duplex d, std::uint64_t stream, std::vector<std::size_t> sizes, Rng r) {
    try {
        std::uint64_t pos = 0;
        for (std::size_t size : sizes) {
            co_await eddy::when_all(send_part(ctx, d, stream, pos, size, Rng{r.next()}),
                                    receive_part(ctx, d, stream, pos, size, Rng{r.next()}));
            pos += size;
            ctx.messages.fetch_add(1);
            ctx.progress.fetch_add(1);
        }
        d.close_write();
        // The echo side closes after its end of stream: nothing more may arrive.
        std::array<std::byte, 64> extra;
        const std::size_t n = co_await d.read(extra);
        if (n != 0) ctx.problems.add("stream " + std::to_string(stream) + ": " + std::to_string(n) + " extra bytes");
        ctx.tasks_done.fetch_add(1);
    } catch (const std::exception& e) {
        ctx.failed("pinger " + std::to_string(stream), e);
    }
}

/// Echoes what it reads until end of stream, then closes its writing side. Buffer size 0:
/// read it from the stream's first byte (0 there: 32 KiB).
Task<void> echoer(Ctx& ctx, Counted, Duplex d, std::size_t bufsize) {
    try {
        if (bufsize == 0) {
            std::byte header{};
            if (co_await d.read(std::span(&header, 1)) != 1) throw std::runtime_error("no header");
            bufsize = header == std::byte{0} ? 32 * 1024 : std::to_integer<std::size_t>(header);
        }
        std::vector<std::byte> buf(bufsize);
        for (;;) {
            const std::size_t n = co_await d.read(buf);
            if (n == 0) break;
            std::span<const std::byte> left = std::span(buf).first(n);
            while (!left.empty()) left = left.subspan(co_await d.write(left));
            ctx.bytes_echoed.fetch_add(static_cast<long>(n));
        }
        d.close_write();
        ctx.tasks_done.fetch_add(1);
    } catch (const std::exception& e) {
        ctx.failed("echoer", e);
    }
}

/// Accepts `n` connections through the reactor and spawns an echoer for each; the echoer
/// learns its buffer size from the connection's first byte (see tcp_client).
Task<void> acceptor(Ctx& ctx, Counted, eddy::net::TcpListener& listener, int n) {
    try {
        for (int i = 0; i < n; ++i) {
            eddy::net::TcpStream s = co_await listener.accept();
            s.set_nodelay(true);
            Duplex d;
            d.sock.emplace(std::move(s));
            eddy::spawn(echoer(ctx, ctx.life(), std::move(d), 0)).detach();
        }
        ctx.tasks_done.fetch_add(1);
    } catch (const std::exception& e) {
        ctx.failed("acceptor", e);
    }
}

/// Connects through the reactor, sends the echoer's buffer size (one byte, 0: 32 KiB),
/// then runs a pinger on the connection.
Task<void> tcp_client(Ctx& ctx, Counted, eddy::net::SocketAddr addr, std::uint64_t stream, EchoPlan plan, Rng r) {
    try {
        eddy::net::TcpStream s = co_await eddy::net::TcpStream::connect(addr);
        s.set_nodelay(true);  // small echoes would wait for delayed ACKs (Nagle) otherwise
        const auto header = static_cast<std::byte>(plan.echo_buffer < 256 ? plan.echo_buffer : 0);
        co_await s.write_all(std::span(&header, 1));
        Duplex d;
        d.sock.emplace(std::move(s));
        co_await pinger(ctx, ctx.life(), std::move(d), stream, std::move(plan.sizes), Rng{r.next()});
        ctx.tasks_done.fetch_add(1);
    } catch (const std::exception& e) {
        ctx.failed("tcp_client " + std::to_string(stream), e);
    }
}

std::size_t total(const std::vector<std::size_t>& v) {
    std::size_t t = 0;
    for (std::size_t x : v) t += x;
    return t;
}

/// Case 1's whole workload; returns the bytes planned (each is sent, echoed and checked).
Task<long> echo_workload(Ctx& ctx, Counted, eddy::net::TcpListener& listener, int streams, int messages, Rng r) {
    std::vector<JoinHandle<void>> handles;
    long planned = 0;
    handles.push_back(eddy::spawn(acceptor(ctx, ctx.life(), listener, streams)));
    for (int i = 0; i < streams; ++i) {
        EchoPlan plan = plan_stream(r, messages);
        planned += static_cast<long>(total(plan.sizes));
        const std::uint64_t stream = mix(ctx.seed, 1000 + static_cast<std::uint64_t>(i));
        handles.push_back(eddy::spawn(tcp_client(ctx, ctx.life(), listener.local_address(), stream,
                                                 std::move(plan), Rng{r.next()})));
    }
    for (int i = 0; i < streams; ++i) {
        EchoPlan plan = plan_stream(r, messages);
        planned += static_cast<long>(total(plan.sizes));
        auto [a, b] = pipe_duplex(r);
        const std::uint64_t stream = mix(ctx.seed, 2000 + static_cast<std::uint64_t>(i));
        eddy::spawn(echoer(ctx, ctx.life(), std::move(b), plan.echo_buffer)).detach();
        handles.push_back(
            eddy::spawn(pinger(ctx, ctx.life(), std::move(a), stream, std::move(plan.sizes), Rng{r.next()})));
    }
    for (auto& h : handles) co_await std::move(h);
    co_return planned;
}

// ---- Cancellation --------------------------------------------------------------------------

/// Slots of stop_sources that cancellers stop at random. An operation that wants to be
/// cancellable publishes a fresh source in its slot and awaits with that source's token; a
/// canceller may stop it at any moment, including before the await and after completion.
class CancelBoard {
public:
    explicit CancelBoard(std::size_t n) : slots_(std::make_unique<Slot[]>(n)), n_(n) {}

    /// Publishes a fresh source in slot i (replacing the previous one) and returns it.
    std::shared_ptr<std::stop_source> arm(std::size_t i) {
        auto src = std::make_shared<std::stop_source>();
        std::lock_guard lock(slots_[i].mutex);
        slots_[i].source = src;
        return src;
    }
    /// Stops slot i's current source; true if this call made the stop request.
    bool cancel(std::size_t i) {
        std::shared_ptr<std::stop_source> src;
        {
            std::lock_guard lock(slots_[i].mutex);
            src = slots_[i].source;
        }
        return src && src->request_stop();
    }
    std::size_t size() const { return n_; }

private:
    struct Slot {
        std::mutex mutex;
        std::shared_ptr<std::stop_source> source;  // guarded by mutex
    };
    std::unique_ptr<Slot[]> slots_;
    std::size_t n_;
};

/// Stops random slots until ctx.stop_cancellers, pacing itself with short sleeps.
Task<void> canceller_task(Ctx& ctx, Counted, CancelBoard& board, Rng r) {
    while (!ctx.stop_cancellers.load()) {
        if (board.cancel(r.below(board.size()))) ctx.cancel_requests.fetch_add(1);
        co_await eddy::sleep(std::chrono::microseconds(10 + r.below(150)));
    }
    ctx.tasks_done.fetch_add(1);
}

/// The same from a plain thread (stop callbacks then run off the workers).
class CancellerThread {
public:
    CancellerThread(Ctx& ctx, CancelBoard& board, std::uint64_t seed)
        : thread_([&ctx, &board, this, seed] {
              Rng r{seed};
              while (!stop_.load()) {
                  if (board.cancel(r.below(board.size()))) ctx.cancel_requests.fetch_add(1);
                  // Pacing only (nothing waits on it): a stop every 100 us or so.
                  std::this_thread::sleep_for(std::chrono::microseconds(r.below(100)));
              }
          }) {}
    ~CancellerThread() { stop(); }
    void stop() {
        stop_.store(true);
        if (thread_.joinable()) thread_.join();
    }

private:
    std::atomic<bool> stop_{false};
    std::thread thread_;  // last: starts once stop_ exists
};

Task<void> stop_after(Ctx& ctx, Counted, std::shared_ptr<std::stop_source> src, std::chrono::microseconds d) {
    co_await eddy::sleep(d);
    if (src->request_stop()) ctx.cancel_requests.fetch_add(1);
}

/// A token for one operation: its source is published in `slot` for the random cancellers
/// and, one time in `one_in`, also stopped by a task of its own after a random delay of up
/// to `max_delay` (about the operation's own duration, so the stop races its completion).
std::stop_token cancellable(Ctx& ctx, CancelBoard& board, std::size_t slot, Rng& r, std::size_t one_in,
                            std::chrono::microseconds max_delay) {
    std::shared_ptr<std::stop_source> src = board.arm(slot);
    std::stop_token token = src->get_token();
    if (r.one_in(one_in)) {
        const auto delay = std::chrono::microseconds(r.below(static_cast<std::size_t>(max_delay.count()) + 1));
        eddy::spawn(stop_after(ctx, ctx.life(), std::move(src), delay)).detach();
    }
    return token;
}

bool is_canceled(const std::system_error& e) { return e.code() == std::errc::operation_canceled; }

/// Writes bytes of `stream` until `limit` or until ctx.stop_writers, each operation
/// cancellable through `slot` (a cancelled write is retried: it must have written nothing),
/// then closes the writing side. Leaves the count in `written`.
Task<void> cancellable_writer(Ctx& ctx, Counted, Duplex d, CancelBoard& board, std::size_t slot,
                              std::uint64_t stream, std::uint64_t limit, std::uint64_t& written, Rng r) {
    try {
        std::vector<std::byte> chunk;
        std::uint64_t pos = 0;
        while (pos < limit && !ctx.stop_writers.load()) {
            const std::size_t len =
                static_cast<std::size_t>(std::min<std::uint64_t>(limit - pos, 1 + r.below(kMaxChunk)));
            chunk.resize(len);
            fill_stream(chunk, stream, pos);
            std::span<const std::byte> left(chunk);
            while (!left.empty()) {
                try {
                    const std::size_t w = co_await d.write(left, cancellable(ctx, board, slot, r, 8, 300us));
                    if (w == 0 || w > left.size()) {
                        ctx.problems.add("stream " + std::to_string(stream) + ": write returned " + std::to_string(w));
                        co_return;
                    }
                    left = left.subspan(w);
                    ctx.bytes_sent.fetch_add(static_cast<long>(w));
                } catch (const std::system_error& e) {
                    if (!is_canceled(e)) throw;
                    ctx.writes_canceled.fetch_add(1);
                }
            }
            pos += len;
            written = pos;
            ctx.progress.fetch_add(1);
            // Now and then a pause, so that the reader waits in the kernel when stopped.
            if (r.one_in(3)) co_await eddy::sleep(std::chrono::microseconds(r.below(200)));
        }
        d.close_write();
        ctx.tasks_done.fetch_add(1);
    } catch (const std::exception& e) {
        ctx.failed("cancellable_writer " + std::to_string(stream), e);
    }
}

/// Reads `stream` to its end with every read cancellable through `slot`; checks each byte,
/// and that a cancelled read left its buffer alone. Leaves the count in `read_total`.
Task<void> cancellable_reader(Ctx& ctx, Counted, Duplex d, CancelBoard& board, std::size_t slot,
                              std::uint64_t stream, std::uint64_t& read_total, Rng r) {
    try {
        constexpr std::byte kUntouched{0xA5};
        std::vector<std::byte> buf;
        std::uint64_t pos = 0;
        for (;;) {
            buf.assign(1 + r.below(kMaxChunk), kUntouched);
            std::size_t n = 0;
            try {
                n = co_await d.read(buf, cancellable(ctx, board, slot, r, 8, 300us));
            } catch (const std::system_error& e) {
                if (!is_canceled(e)) throw;
                ctx.reads_canceled.fetch_add(1);
                if (std::any_of(buf.begin(), buf.end(), [&](std::byte b) { return b != kUntouched; }))
                    ctx.problems.add("stream " + std::to_string(stream) +
                                     ": a cancelled read wrote into its buffer at offset " + std::to_string(pos));
                continue;
            }
            if (n == 0) break;
            if (n > buf.size() || !matches_stream(std::span(buf).first(n), stream, pos)) {
                ctx.problems.add("stream " + std::to_string(stream) + ": wrong bytes (" + std::to_string(n) +
                                 ") at offset " + std::to_string(pos));
                co_return;
            }
            pos += n;
            read_total = pos;
            ctx.bytes_checked.fetch_add(static_cast<long>(n));
            ctx.progress.fetch_add(1);
        }
        ctx.tasks_done.fetch_add(1);
    } catch (const std::exception& e) {
        ctx.failed("cancellable_reader " + std::to_string(stream), e);
    }
}

/// Reads the 8-byte id a connector sent and counts it in `seen`.
Task<void> id_reader(Ctx& ctx, Counted, eddy::net::TcpStream s, std::vector<std::atomic<int>>& seen) {
    try {
        std::uint64_t id = 0;
        co_await s.read_exact(std::as_writable_bytes(std::span(&id, 1)));
        if (id < seen.size())
            seen[id].fetch_add(1);
        else
            ctx.problems.add("a connection sent id " + std::to_string(id));
        ctx.connections.fetch_add(1);
    } catch (const std::exception& e) {
        ctx.failed("id_reader", e);
    }
}

/// Accepts exactly `n` connections, every accept cancellable through `slot` (a cancelled
/// accept must not have taken a connection: it would be lost, and its descriptor leaked),
/// and reads each connection's id.
Task<void> cancellable_acceptor(Ctx& ctx, Counted, eddy::net::TcpListener& listener, CancelBoard& board,
                                std::size_t slot, int n, std::vector<std::atomic<int>>& seen, Rng r) {
    try {
        std::vector<JoinHandle<void>> readers;
        while (static_cast<int>(readers.size()) < n) {
            try {
                eddy::net::TcpStream s = co_await listener.accept(cancellable(ctx, board, slot, r, 4, 300us));
                readers.push_back(eddy::spawn(id_reader(ctx, ctx.life(), std::move(s), seen)));
            } catch (const std::system_error& e) {
                if (!is_canceled(e)) throw;
                ctx.accepts_canceled.fetch_add(1);
            }
        }
        for (auto& h : readers) co_await std::move(h);
        ctx.tasks_done.fetch_add(1);
    } catch (const std::exception& e) {
        ctx.failed("cancellable_acceptor", e);
    }
}

/// Connects `n` times through the reactor and sends ids first_id, first_id + 1, ...
Task<void> connector(Ctx& ctx, Counted, eddy::net::SocketAddr addr, std::uint64_t first_id, int n, Rng r) {
    try {
        for (int i = 0; i < n; ++i) {
            eddy::net::TcpStream s = co_await eddy::net::TcpStream::connect(addr);
            const std::uint64_t id = first_id + static_cast<std::uint64_t>(i);
            co_await s.write_all(std::as_bytes(std::span(&id, 1)));
            if (r.one_in(4)) co_await eddy::sleep(std::chrono::microseconds(r.below(300)));
        }
        ctx.tasks_done.fetch_add(1);
    } catch (const std::exception& e) {
        ctx.failed("connector", e);
    }
}

/// Streams set up by the test thread for case 2 (and 4): the writer's and the reader's ends.
struct CancelStream {
    Duplex writer_end;
    Duplex reader_end;
    std::uint64_t stream;
    std::uint64_t limit;
    std::uint64_t written = 0;  // by the writer task
    std::uint64_t read = 0;     // by the reader task
};

std::vector<CancelStream> make_cancel_streams(Ctx& ctx, eddy::net::TcpListener& listener, int per_kind,
                                              std::uint64_t bytes, Rng& r) {
    std::vector<CancelStream> v;
    for (int i = 0; i < 2 * per_kind; ++i) {
        auto [a, b] = i < per_kind ? pipe_duplex(r) : tcp_duplex(listener, r);
        v.push_back(
            CancelStream{std::move(a), std::move(b), mix(ctx.seed, 3000 + static_cast<std::uint64_t>(i)), bytes});
    }
    return v;
}

// ---- Timers --------------------------------------------------------------------------------

/// `sleeps` short sleeps (0-3 ms), a third of them cancellable through `slot`; between
/// them, often a small round trip through the sleeper's own pipe. A sleep that completes
/// must not be early; one that is cancelled may end either way.
Task<void> sleeper(Ctx& ctx, Counted, CancelBoard& board, std::size_t slot, int sleeps, std::uint64_t stream, Rng r) {
    try {
        auto p = eddy::io::pipe();
        std::uint64_t pos = 0;
        std::array<std::byte, 64> out;
        std::array<std::byte, 64> in;
        for (int i = 0; i < sleeps; ++i) {
            const auto d = std::chrono::microseconds(r.below(3001));
            const bool may_cancel = r.one_in(3);
            std::stop_token token;
            if (may_cancel) token = cancellable(ctx, board, slot, r, 2, 3ms);
            const auto start = Clock::now();
            // sleep() measures from its own now(), which is later than `start`.
            Clock::time_point due = start + d;
            try {
                switch (r.below(3)) {
                case 0:
                    co_await eddy::sleep(d, token);
                    break;
                case 1:
                    co_await eddy::sleep_until(due, token);
                    break;
                default:
                    // On a 500 us grid: many sleepers share the very same deadline.
                    due = Clock::time_point(
                        (due.time_since_epoch() / 500us + 1) *
                        std::chrono::duration_cast<Clock::duration>(std::chrono::microseconds(500)));
                    co_await eddy::sleep_until(due, token);
                    break;
                }
                if (Clock::now() < due) {
                    ctx.sleeps_early.fetch_add(1);
                    ctx.problems.add("a sleep of " + std::to_string(d.count()) + " us completed early");
                }
            } catch (const std::system_error& e) {
                if (!may_cancel || !is_canceled(e)) throw;
                ctx.sleeps_canceled.fetch_add(1);
            }
            ctx.sleeps_done.fetch_add(1);
            ctx.progress.fetch_add(1);
            if (r.one_in(2)) {
                const std::size_t n = 1 + r.below(out.size());
                fill_stream(std::span(out).first(n), stream, pos);
                co_await eddy::test::write_all(p.write_end.get(), std::span(out).first(n));
                const std::size_t got = co_await eddy::test::read_exact(p.read_end.get(), std::span(in).first(n));
                if (got != n || !matches_stream(std::span(in).first(n), stream, pos))
                    ctx.problems.add("sleeper pipe " + std::to_string(stream) + ": wrong round trip");
                pos += n;
                ctx.bytes_checked.fetch_add(static_cast<long>(n));
            }
        }
        ctx.tasks_done.fetch_add(1);
    } catch (const std::exception& e) {
        ctx.failed("sleeper", e);
    }
}

/// Spawns every task in `tasks`, awaits them all.
Task<void> run_all(std::vector<Task<void>> tasks) {
    std::vector<JoinHandle<void>> handles;
    for (auto& t : tasks) handles.push_back(eddy::spawn(std::move(t)));
    for (auto& h : handles) co_await std::move(h);
}

/// Awaits `h` (of a runtime that may be gone) and classifies how its task ended.
Task<Outcome> classify(JoinHandle<void> h) { co_return co_await eddy::test::join_outcome(std::move(h)); }

} // namespace

TEST_SUITE("stress/io_stress") {

TEST_CASE("pipe ping-pong and TCP echo, many streams at once, on tiny and normal rings: every byte once") {
    long total_bytes = 0;
    long total_messages = 0;
    for_each_round("pipe ping-pong and TCP echo", 1, kEchoRounds, [&](Ctx& ctx, const Config& config, int) {
        Rng r{ctx.seed};
        auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
        long planned = 0;
        {
            eddy::Runtime rt(config_for(ctx, config));
            planned = rt.block_on(echo_workload(ctx, ctx.life(), listener, kEchoStreams, kEchoMessages, Rng{r.next()}));
        }
        // Per stream: a pinger, an echoer; per TCP stream also its client; one acceptor.
        CHECK(ctx.tasks_done.load() == 4L * kEchoStreams + kEchoStreams + 1);
        CHECK(ctx.messages.load() == 2L * kEchoStreams * kEchoMessages);
        CHECK(ctx.bytes_sent.load() == planned);
        CHECK(ctx.bytes_echoed.load() == planned);
        CHECK(ctx.bytes_checked.load() == planned);
        CHECK(ctx.spawn_refused.load() == 0);
        total_bytes += planned;
        total_messages += ctx.messages.load();
    });
    MESSAGE(total_messages << " messages, " << total_bytes << " bytes echoed and checked");
}

TEST_CASE("random cancellation from tasks and a plain thread racing completions loses and repeats nothing") {
    long total_read_cancels = 0;
    long total_write_cancels = 0;
    long total_accept_cancels = 0;
    long total_bytes = 0;
    for_each_round("random cancellation", 2, kCancelRounds, [&](Ctx& ctx, const Config& config, int) {
        Rng r{ctx.seed};
        auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
        // Limits no round reaches: the writers stop after kCancelTraffic.
        auto streams = make_cancel_streams(ctx, listener, kCancelStreams, std::uint64_t{1} << 40, r);
        CancelBoard board(2 * streams.size() + 2);
        // Connections through a second listener whose accepts are cancelled at random.
        auto accept_listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
        std::vector<std::atomic<int>> seen(2 * kConnectionsPerConnector);
        {
            eddy::Runtime rt(config_for(ctx, config));
            CancellerThread plain(ctx, board, r.next());
            std::vector<JoinHandle<void>> cancellers;
            for (int i = 0; i < 2; ++i)
                cancellers.push_back(rt.spawn(canceller_task(ctx, ctx.life(), board, Rng{r.next()})));
            std::vector<Task<void>> tasks;
            for (std::size_t i = 0; i < streams.size(); ++i) {
                auto& s = streams[i];
                tasks.push_back(cancellable_writer(ctx, ctx.life(), std::move(s.writer_end), board, 2 * i, s.stream,
                                                   s.limit, s.written, Rng{r.next()}));
                tasks.push_back(cancellable_reader(ctx, ctx.life(), std::move(s.reader_end), board, 2 * i + 1,
                                                   s.stream, s.read, Rng{r.next()}));
            }
            for (int i = 0; i < 2; ++i) {
                tasks.push_back(cancellable_acceptor(ctx, ctx.life(), accept_listener, board,
                                                     2 * streams.size() + static_cast<std::size_t>(i),
                                                     kConnectionsPerConnector, seen, Rng{r.next()}));
                tasks.push_back(connector(ctx, ctx.life(), accept_listener.local_address(),
                                          static_cast<std::uint64_t>(i * kConnectionsPerConnector),
                                          kConnectionsPerConnector, Rng{r.next()}));
            }
            tasks.push_back([](Ctx& c, Counted) -> Task<void> {
                co_await eddy::sleep(kCancelTraffic);
                c.stop_writers.store(true);
            }(ctx, ctx.life()));
            rt.block_on(run_all(std::move(tasks)));
            ctx.stop_cancellers.store(true);
            plain.stop();
            for (auto& h : cancellers) rt.block_on(classify(std::move(h)));
        }
        // Writers, readers, two acceptors, two connectors, two canceller tasks.
        CHECK(ctx.tasks_done.load() == 2L * static_cast<long>(streams.size()) + 6);
        CHECK(ctx.connections.load() == 2L * kConnectionsPerConnector);
        long ids_not_once = 0;
        for (const auto& n : seen) ids_not_once += n.load() != 1;
        CHECK(ids_not_once == 0);
        for (const auto& s : streams) {
            CAPTURE(s.stream);
            CHECK(s.written > 0);
            CHECK(s.read == s.written);
        }
        CHECK(ctx.bytes_checked.load() == ctx.bytes_sent.load());
        CHECK(ctx.spawn_refused.load() == 0);
        total_read_cancels += ctx.reads_canceled.load();
        total_write_cancels += ctx.writes_canceled.load();
        total_accept_cancels += ctx.accepts_canceled.load();
        total_bytes += ctx.bytes_checked.load();
    });
    MESSAGE(total_bytes << " bytes checked; cancelled reads: " << total_read_cancels << ", writes: "
                        << total_write_cancels << ", accepts: " << total_accept_cancels);
    // Thousands of stop requests land on readers that mostly wait in the kernel: some must
    // have cancelled something, or this test did not test cancellation.
    CHECK(total_read_cancels > 0);
}

TEST_CASE("thousands of short timers, some cancelled, interleaved with I/O: none early, all resume") {
    long total_canceled = 0;
    long total_sleeps = 0;
    for_each_round("timers", 3, kTimerRounds, [&](Ctx& ctx, const Config& config, int) {
        Rng r{ctx.seed};
        auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
        CancelBoard board(kSleepers);
        long echo_planned = 0;
        {
            eddy::Runtime rt(config_for(ctx, config));
            CancellerThread plain(ctx, board, r.next());
            std::vector<JoinHandle<void>> cancellers;
            cancellers.push_back(rt.spawn(canceller_task(ctx, ctx.life(), board, Rng{r.next()})));
            // Echo traffic alongside, with fewer and smaller messages than case 1.
            JoinHandle<long> echo = rt.spawn(echo_workload(ctx, ctx.life(), listener, 2, 6, Rng{r.next()}));
            std::vector<Task<void>> sleepers;
            for (int i = 0; i < kSleepers; ++i)
                sleepers.push_back(sleeper(ctx, ctx.life(), board, static_cast<std::size_t>(i), kSleepsEach,
                                           mix(ctx.seed, 4000 + static_cast<std::uint64_t>(i)), Rng{r.next()}));
            rt.block_on(run_all(std::move(sleepers)));
            echo_planned = rt.block_on([](JoinHandle<long> h) -> Task<long> { co_return co_await std::move(h); }(
                std::move(echo)));
            ctx.stop_cancellers.store(true);
            plain.stop();
            for (auto& h : cancellers) rt.block_on(classify(std::move(h)));
        }
        CHECK(ctx.sleeps_done.load() == long{kSleepers} * kSleepsEach);
        CHECK(ctx.sleeps_early.load() == 0);
        CHECK(ctx.bytes_echoed.load() == echo_planned);
        CHECK(ctx.spawn_refused.load() == 0);
        total_canceled += ctx.sleeps_canceled.load();
        total_sleeps += ctx.sleeps_done.load();
    });
    MESSAGE(total_sleeps << " sleeps, " << total_canceled << " of them cancelled");
}

TEST_CASE("destroying the runtime with I/O, timers and cancellations in flight: no hang, leak or race") {
    long total_finished = 0;
    long total_stopped = 0;
    for_each_round("shutdown in flight", 4, kShutdownRounds, [&](Ctx& ctx, const Config& config, int) {
        Rng r{ctx.seed};
        std::vector<JoinHandle<void>> handles;
        {
            auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
            // Cancellable streams longer than the round lasts, and sleepers with many sleeps.
            auto streams = make_cancel_streams(ctx, listener, 2, std::uint64_t{1} << 40, r);
            CancelBoard board(2 * streams.size() + kSleepers);
            auto rt = std::make_unique<eddy::Runtime>(config_for(ctx, config));
            CancellerThread plain(ctx, board, r.next());
            for (int i = 0; i < 2; ++i)
                handles.push_back(rt->spawn(canceller_task(ctx, ctx.life(), board, Rng{r.next()})));
            for (std::size_t i = 0; i < streams.size(); ++i) {
                auto& s = streams[i];
                handles.push_back(rt->spawn(cancellable_writer(ctx, ctx.life(), std::move(s.writer_end), board, 2 * i,
                                                               s.stream, s.limit, s.written, Rng{r.next()})));
                handles.push_back(rt->spawn(cancellable_reader(ctx, ctx.life(), std::move(s.reader_end), board,
                                                               2 * i + 1, s.stream, s.read, Rng{r.next()})));
            }
            for (int i = 0; i < kSleepers; ++i)
                handles.push_back(
                    rt->spawn(sleeper(ctx, ctx.life(), board, 2 * streams.size() + static_cast<std::size_t>(i), 1000,
                                      mix(ctx.seed, 5000 + static_cast<std::uint64_t>(i)), Rng{r.next()})));
            // Echo traffic (the acceptor and clients go through the reactor), and some that
            // never completes: an accept nobody connects to, a read nobody writes to, a long
            // sleep.
            handles.push_back(rt->spawn([](Ctx& c, Counted, eddy::net::TcpListener& l, Rng rr) -> Task<void> {
                (void)co_await echo_workload(c, c.life(), l, 3, 1000, rr);
            }(ctx, ctx.life(), listener, Rng{r.next()})));
            // Short ones that usually finish before the shutdown, so both outcomes occur.
            for (int i = 0; i < 20; ++i)
                handles.push_back(
                    rt->spawn(sleeper(ctx, ctx.life(), board, 2 * streams.size() + static_cast<std::size_t>(i),
                                      1 + static_cast<int>(r.below(3)),
                                      mix(ctx.seed, 6000 + static_cast<std::uint64_t>(i)), Rng{r.next()})));
            auto idle_listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
            auto idle_pipe = eddy::io::pipe();
            handles.push_back(rt->spawn([](Counted, eddy::net::TcpListener& l) -> Task<void> {
                (void)co_await l.accept();
            }(ctx.life(), idle_listener)));
            handles.push_back(rt->spawn([](Counted, int fd) -> Task<void> {
                std::array<std::byte, 256> buf;
                (void)co_await eddy::io::read(fd, buf);
            }(ctx.life(), idle_pipe.read_end.get())));
            handles.push_back(rt->spawn([](Counted) -> Task<void> { co_await eddy::sleep(1h); }(ctx.life())));

            // Shut down at once (operations still in the inbox), or after some progress.
            const long targets[] = {0, 50, 500, 5000};
            const long target = targets[r.below(std::size(targets))];
            CAPTURE(target);
            const auto deadline = Clock::now() + 60s;
            while (ctx.progress.load() < target && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
            INFO(ctx.status());
            CHECK(ctx.progress.load() >= target);
            if (r.one_in(2)) rt->shutdown();  // else the destructor does it
            rt.reset();
            plain.stop();  // it ran throughout the shutdown
        }
        // Every handle: its task finished (a result) or was destroyed (RuntimeStopped).
        const long tasks = static_cast<long>(handles.size());
        long finished = 0;
        long stopped = 0;
        {
            eddy::Runtime checker(eddy::RuntimeConfig{.workers = 1});
            for (auto& h : handles) {
                CHECK(h.is_finished());
                const Outcome o = checker.block_on(classify(std::move(h)));
                CHECK((o == Outcome::value || o == Outcome::runtime_stopped));
                finished += o == Outcome::value;
                stopped += o == Outcome::runtime_stopped;
            }
        }
        handles.clear();
        CHECK(stopped > 0);  // the never-completing ones at least
        CHECK(finished + stopped == tasks);
        total_finished += finished;
        total_stopped += stopped;
        CHECK(ctx.sleeps_early.load() == 0);
    });
    MESSAGE("tasks that finished before shutdown: " << total_finished << ", destroyed by it: " << total_stopped);
}

} // TEST_SUITE
