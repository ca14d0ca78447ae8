// tests/stress/io_workloads/bookkeeping.hpp: what every io_stress round shares: the sizes
// and knobs (EDDY_STRESS_ROUNDS, EDDY_STRESS_SEED), the seeded randomness and the stream
// bytes derived from it, the round's context (Ctx: the counters every task reports to and the
// problems it found), and the round loop, which checks after each round that every frame was
// destroyed and every descriptor closed. tests/stress/io_stress_test.cpp describes the cases.
#pragma once

#include <eddy/net/socket_addr.hpp>
#include <eddy/runtime/config.hpp>
#include <eddy/tasks/errors.hpp>

#include "support/counted.hpp"
#include "support/stress_env.hpp"
#include "support/watchdog.hpp"

#include <doctest/doctest.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iterator>
#include <map>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace eddy::test::io_stress {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// ---- Sizes and knobs ---------------------------------------------------------------------

// Rounds per case (EDDY_STRESS_ROUNDS overrides all four) and sizes per round. Measured on
// the 2-core machine: about 16 s for the whole file in the TSan build, 15 s with ASan+UBSan,
// 13 s in a release build (which does more work per round: case 2 runs for a fixed time per
// round, the others for a fixed amount of work).
#ifdef EDDY_TEST_TSAN
inline constexpr int kEchoRounds = 9;
inline constexpr int kCancelRounds = 9;
inline constexpr int kTimerRounds = 9;
inline constexpr int kShutdownRounds = 60;
inline constexpr int kEchoStreams = 8;          // per kind (pipe pairs, TCP connections)
inline constexpr int kEchoMessages = 40;        // per stream
inline constexpr int kCancelStreams = 4;        // per kind
inline constexpr auto kCancelTraffic = 1000ms;  // per round
inline constexpr int kSleepers = 600;
inline constexpr int kSleepsEach = 20;
#else
inline constexpr int kEchoRounds = 18;
inline constexpr int kCancelRounds = 18;
inline constexpr int kTimerRounds = 18;
inline constexpr int kShutdownRounds = 60;
inline constexpr int kEchoStreams = 8;
inline constexpr int kEchoMessages = 60;
inline constexpr int kCancelStreams = 6;
inline constexpr auto kCancelTraffic = 400ms;
inline constexpr int kSleepers = 600;
inline constexpr int kSleepsEach = 25;
#endif
inline constexpr int kConnectionsPerConnector = 100;    // case 2, per round
inline constexpr std::size_t kMaxMessage = 160 * 1024;  // more than a pipe holds (64 KiB)
inline constexpr std::size_t kMaxChunk = 8 * 1024;      // reader buffers and writer chunks in case 2
inline constexpr std::chrono::seconds kWatchdogLimit = std::chrono::minutes(3);

inline int env_int(const char* name, int fallback) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return fallback;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end != '\0' || n < 1 || n > 1'000'000)
        throw std::invalid_argument(std::string(name) + " must be a count >= 1");
    return static_cast<int>(n);
}

inline int rounds(int fallback) { return env_int("EDDY_STRESS_ROUNDS", fallback); }

inline std::uint64_t base_seed() {
    const char* v = std::getenv("EDDY_STRESS_SEED");
    if (v == nullptr || *v == '\0') return 20240611;
    return std::strtoull(v, nullptr, 0);
}

/// The configurations the rounds cycle through: worker count (EDDY_STRESS_WORKERS overrides) and SQ size.
struct Config {
    std::size_t workers;
    unsigned ring_entries;
};
inline constexpr Config kConfigs[] = {{2, 4}, {4, 8}, {3, 1024}, {4, 4}, {2, 8}, {3, 4}, {2, 1024}, {4, 1024}, {3, 8}};

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

inline std::uint64_t mix(std::uint64_t a, std::uint64_t b) noexcept {
    return Rng{a * 0x2545F4914F6CDD1Dull ^ b}.next();
}

/// Byte `pos` of stream `stream`: not periodic at any small period, different per stream.
inline std::byte stream_byte(std::uint64_t stream, std::uint64_t pos) noexcept {
    const std::uint64_t word = mix(stream, pos / 8);
    return static_cast<std::byte>(word >> (8 * (pos % 8)));
}

inline void fill_stream(std::span<std::byte> out, std::uint64_t stream, std::uint64_t pos) noexcept {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = stream_byte(stream, pos + i);
}

/// True if `got` is bytes [pos, pos + got.size()) of `stream`.
inline bool matches_stream(std::span<const std::byte> got, std::uint64_t stream, std::uint64_t pos) noexcept {
    for (std::size_t i = 0; i < got.size(); ++i)
        if (got[i] != stream_byte(stream, pos + i)) return false;
    return true;
}

/// Mixed sizes: single bytes, small, medium, and larger than a pipe's buffer.
inline std::size_t message_size(Rng& r, std::size_t max = kMaxMessage) {
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
    explicit Ctx(std::uint64_t round_seed) : seed(round_seed) {}
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
    std::atomic<long> connections{0};      // accepted and their id read
    std::atomic<long> cancel_requests{0};  // request_stop() calls that were the first on their source
    std::atomic<long> sleeps_done{0};
    std::atomic<long> sleeps_canceled{0};
    std::atomic<long> sleeps_early{0};
    std::atomic<long> progress{0};  // anything finished (case 4 waits on it)
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

inline eddy::RuntimeConfig config_for(Ctx& ctx, const Config& c) {
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
inline std::map<int, std::string> open_fds() {
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
inline std::string new_fds(const std::map<int, std::string>& before, const std::map<int, std::string>& after) {
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
            eddy::test::Watchdog watchdog("io_stress",
                                          std::string(name) + ", EDDY_STRESS_SEED=" + std::to_string(base) + " round " +
                                              std::to_string(round) + " (" + std::to_string(config.workers) +
                                              " workers, " + std::to_string(config.ring_entries) + " ring entries)",
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

}  // namespace eddy::test::io_stress
