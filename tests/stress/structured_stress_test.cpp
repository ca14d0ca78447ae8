// tests/stress/structured_stress_test.cpp: structured concurrency and cancellation under load.
//
// Four cases, each for several rounds with a fresh Runtime per round (2 to 4 workers, some
// rounds on a tiny ring so the reactor's full-SQ paths run):
//   1. random trees: every session is a random tree of when_all, when_any, task_group and
//      with_timeout over leaves that return at once, yield, sleep 0-2 ms, sleep for an hour
//      (only ever ended by a cancellation), read a pipe that never gets data, or throw. All
//      sessions of a round run as children of one TaskGroup.
//   2. the same trees while a plain thread cancels the round's group at a random moment.
//   3. pipe readers whose every read is raced by a with_timeout of 0-2 ms while writers
//      send a known byte stream in random chunks: every byte arrives exactly once, in order.
//   4. the Runtime destroyed while trees and readers are in flight.
//
// What is checked: no hang (a Watchdog per round names the case, round and seed); every frame
// ends (each leaf and each inner node holds an eddy::test::Counted, so `alive() == 0` after
// the round); every session ends exactly one way (value, TimedOut, the leaf's runtime_error,
// or OperationCancelled in case 2), and the counts add up; in case 3 the exact byte stream.
// LeakSanitizer (ASan build) and TSan (TSan build) watch the rest.
//
// Knobs (environment): EDDY_STRESS_ROUNDS=N rounds of every case; EDDY_STRESS_SEED=S;
// EDDY_STRESS_WORKERS=W[,W...] worker counts (tests/support/stress_env.hpp).
#include <eddy/eddy.hpp>

#include "support/counted.hpp"
#include "support/stress_env.hpp"
#include "support/watchdog.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <memory>
#include <span>
#include <stop_token>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using eddy::OperationCancelled;
using eddy::Task;
using eddy::TaskGroup;
using eddy::TimedOut;
using eddy::test::Counted;
using eddy::test::LifetimeCounter;
using namespace std::chrono_literals;

namespace {

#ifdef EDDY_TEST_TSAN
constexpr int kRounds = 10;
constexpr int kSessions = 250;
constexpr int kPipes = 4;
constexpr std::size_t kStreamBytes = 48 * 1024;
#else
constexpr int kRounds = 30;
constexpr int kSessions = 600;
constexpr int kPipes = 6;
constexpr std::size_t kStreamBytes = 256 * 1024;
#endif
constexpr std::chrono::seconds kWatchdogLimit = std::chrono::minutes(3);

int rounds() {
    const char* v = std::getenv("EDDY_STRESS_ROUNDS");
    return v != nullptr && *v != '\0' ? std::atoi(v) : kRounds;
}

std::uint64_t base_seed() {
    const char* v = std::getenv("EDDY_STRESS_SEED");
    return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 0) : 20261122;
}

struct Config {
    std::size_t workers;
    unsigned ring_entries;
};
constexpr Config kConfigs[] = {{2, 4}, {4, 1024}, {3, 8}, {2, 1024}, {4, 4}, {3, 1024}};

eddy::RuntimeConfig config_of(int round) {
    const Config& c = kConfigs[static_cast<std::size_t>(round) % std::size(kConfigs)];
    return eddy::RuntimeConfig{.workers = eddy::test::stress_workers(c.workers, round), .ring_entries = c.ring_entries};
}

/// splitmix64.
struct Rng {
    std::uint64_t s;
    std::uint64_t next() noexcept {
        std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    std::size_t below(std::size_t n) noexcept { return static_cast<std::size_t>(next() % n); }
};

std::byte stream_byte(std::uint64_t stream, std::uint64_t pos) noexcept {
    return static_cast<std::byte>(Rng{stream * 0x2545F4914F6CDD1Dull ^ (pos / 8)}.next() >> (8 * (pos % 8)));
}

/// What a round shares with its tasks; outlives the Runtime.
struct Round {
    LifetimeCounter frames;
    std::atomic<int> values{0};
    std::atomic<int> timeouts{0};
    std::atomic<int> failures{0};
    std::atomic<int> cancellations{0};
    std::atomic<int> other{0};
    std::atomic<int> groups_cancelled{0};
    int ended() const { return values + timeouts + failures + cancellations + other; }
    std::string status() const {
        return "values " + std::to_string(values) + ", timeouts " + std::to_string(timeouts) + ", failures " +
               std::to_string(failures) + ", cancellations " + std::to_string(cancellations) + ", other " +
               std::to_string(other) + ", frames alive " + std::to_string(frames.alive());
    }
};

// ---- Case 1, 2, 4: random trees ----------------------------------------------------------

/// A pipe that never gets data: reading it blocks in the kernel until cancelled.
struct QuietPipe {
    eddy::io::Pipe p = eddy::io::pipe();
};

Task<int> leaf(Rng rng, Round& r, std::shared_ptr<QuietPipe> quiet, bool may_block) {
    Counted frame(r.frames);
    switch (rng.below(may_block ? 7 : 5)) {
    case 0:
        co_return 1;
    case 1:
        for (std::size_t i = rng.below(4); i > 0; --i) co_await eddy::yield_now();
        co_return 2;
    case 2:
        co_await eddy::sleep(std::chrono::microseconds(rng.below(2000)));
        co_return 3;
    case 3:
        co_await eddy::sleep(std::chrono::microseconds(rng.below(500)));
        throw std::runtime_error("leaf failed");
    case 4:
        co_await eddy::sleep(0ms);
        co_return 4;
    case 5:
        co_await eddy::sleep(1h);  // only a cancellation ends it
        co_return 5;
    default: {
        std::byte b[16];
        (void)co_await eddy::io::read(quiet->p.read_end.get(), b);  // nor this
        co_return 6;
    }
    }
}

/// A random tree of depth <= `depth`. `may_block`: a leaf may wait forever (only where a
/// sibling or a timeout is sure to end it).
Task<int> tree(Rng rng, int depth, Round& r, std::shared_ptr<QuietPipe> quiet, bool may_block) {
    Counted frame(r.frames);
    const std::size_t kind = depth == 0 ? 0 : rng.below(5);
    switch (kind) {
    case 0:
        co_return co_await leaf(Rng{rng.next()}, r, quiet, may_block);
    case 1: {  // when_all: every child must end on its own
        std::vector<Task<int>> children;
        for (std::size_t i = 2 + rng.below(2); i > 0; --i)
            children.push_back(tree(Rng{rng.next()}, depth - 1, r, quiet, may_block));
        int sum = 0;
        for (int v : co_await eddy::when_all(std::move(children))) sum += v;
        co_return sum;
    }
    case 2: {  // when_any: one child that ends on its own is enough
        std::vector<Task<int>> children;
        children.push_back(tree(Rng{rng.next()}, depth - 1, r, quiet, false));
        for (std::size_t i = 1 + rng.below(2); i > 0; --i)
            children.push_back(tree(Rng{rng.next()}, depth - 1, r, quiet, true));
        co_return (co_await eddy::when_any(std::move(children))).value;
    }
    case 3: {  // a task group whose children add up
        auto sum = std::make_shared<std::atomic<int>>(0);
        co_await eddy::task_group([&](TaskGroup& g) -> Task<void> {
            for (std::size_t i = 1 + rng.below(3); i > 0; --i)
                g.spawn([](Task<int> t, std::shared_ptr<std::atomic<int>> s) -> Task<void> {
                    s->fetch_add(co_await std::move(t));
                }(tree(Rng{rng.next()}, depth - 1, r, quiet, may_block), sum));
            co_return;
        });
        co_return sum->load();
    }
    default:  // a timeout ends anything
        co_return co_await eddy::with_timeout(tree(Rng{rng.next()}, depth - 1, r, quiet, true),
                                              std::chrono::microseconds(rng.below(3000)));
    }
}

/// One session: a tree, ended one way or another, counted.
Task<void> session(Rng rng, Round& r, std::shared_ptr<QuietPipe> quiet) {
    try {
        (void)co_await tree(rng, 4, r, std::move(quiet), false);
        r.values.fetch_add(1);
    } catch (const TimedOut&) {
        r.timeouts.fetch_add(1);
    } catch (const OperationCancelled&) {
        r.cancellations.fetch_add(1);
    } catch (const std::runtime_error&) {
        r.failures.fetch_add(1);
    } catch (...) {
        r.other.fetch_add(1);
    }
}

/// Every session in one group, under `stop` as well. Sessions catch everything, so the group
/// itself ends normally, or with OperationCancelled when `stop` cancelled it (counted here).
Task<void> all_sessions(std::uint64_t seed, Round& r, std::stop_token stop) {
    auto quiet = std::make_shared<QuietPipe>();
    try {
        co_await eddy::with_stop_token(eddy::task_group([&](TaskGroup& g) -> Task<void> {
                                           Rng rng{seed};
                                           for (int i = 0; i < kSessions; ++i) {
                                               g.spawn(session(Rng{rng.next()}, r, quiet));
                                               if (i % 16 == 0) co_await eddy::yield_now();
                                           }
                                           co_return;
                                       }),
                                       std::move(stop));
    } catch (const OperationCancelled&) {
        r.groups_cancelled.fetch_add(1);
    }
}

// ---- Case 3: reads raced by timeouts ---------------------------------------------------

Task<void> write_stream(eddy::io::FileDescriptor fd, std::uint64_t stream, Rng rng) {
    std::vector<std::byte> chunk;
    for (std::size_t pos = 0; pos < kStreamBytes;) {
        const std::size_t n = std::min(kStreamBytes - pos, 1 + rng.below(8192));
        chunk.resize(n);
        for (std::size_t i = 0; i < n; ++i) chunk[i] = stream_byte(stream, pos + i);
        for (std::size_t done = 0; done < n;)
            done += co_await eddy::io::write(fd.get(), std::span(chunk).subspan(done));
        pos += n;
        if (rng.below(4) == 0) co_await eddy::sleep(std::chrono::microseconds(rng.below(1500)));
    }
}  // fd closes: the reader sees end of stream

Task<std::size_t> read_some(int fd, std::span<std::byte> buf) { co_return co_await eddy::io::read(fd, buf); }

/// Reads until end of stream with every read under a random 0-2 ms timeout; returns the
/// number of bytes that matched the stream (all of them, or the test fails).
Task<void> read_stream(eddy::io::FileDescriptor fd, std::uint64_t stream, Rng rng, Round& r, std::size_t& got,
                       bool& intact) {
    Counted frame(r.frames);
    std::vector<std::byte> buf(4096);
    for (;;) {
        std::size_t n = 0;
        try {
            n = co_await eddy::with_timeout(read_some(fd.get(), buf), std::chrono::microseconds(rng.below(2000)));
        } catch (const TimedOut&) {
            r.timeouts.fetch_add(1);
            continue;  // the cancelled read took nothing: the bytes wait for the next one
        }
        if (n == 0) co_return;
        for (std::size_t i = 0; i < n; ++i)
            if (buf[i] != stream_byte(stream, got + i)) intact = false;
        got += n;
    }
}

template <class F>
void in_round(const char* what, int round, std::uint64_t seed, Round& r, F body) {
    const std::string name = std::string(what) + " round " + std::to_string(round) + " seed " + std::to_string(seed);
    eddy::test::Watchdog dog("structured_stress", name, kWatchdogLimit, [&r] { return r.status(); });
    INFO(name);
    body();
}

}  // namespace

TEST_CASE(
    "random trees of when_all, when_any, task_group and with_timeout: every session ends once, every frame goes") {
    for (int round = 0; round < rounds(); ++round) {
        const std::uint64_t seed = base_seed() + static_cast<std::uint64_t>(round);
        Round r;
        in_round("trees", round, seed, r, [&] {
            eddy::Runtime rt(config_of(round));
            rt.block_on(all_sessions(seed, r, {}));
        });
        CHECK(r.ended() == kSessions);
        CHECK(r.cancellations.load() == 0);
        CHECK(r.groups_cancelled.load() == 0);
        CHECK(r.other.load() == 0);
        CHECK(r.frames.alive() == 0);
    }
}

TEST_CASE("the same trees while a plain thread cancels their group at a random moment") {
    for (int round = 0; round < rounds(); ++round) {
        const std::uint64_t seed = base_seed() + 1000 + static_cast<std::uint64_t>(round);
        Round r;
        in_round("cancel storm", round, seed, r, [&] {
            eddy::Runtime rt(config_of(round));
            std::stop_source stop;
            std::thread canceller([&stop, seed] {
                std::this_thread::sleep_for(std::chrono::microseconds(Rng{seed}.below(5000)));
                stop.request_stop();
            });
            rt.block_on(all_sessions(seed, r, stop.get_token()));
            canceller.join();
        });
        CHECK(r.ended() == kSessions);
        CHECK(r.groups_cancelled.load() <= 1);
        CHECK(r.other.load() == 0);
        CHECK(r.frames.alive() == 0);
    }
}

TEST_CASE("pipe reads raced by timeouts deliver every byte exactly once, in order") {
    for (int round = 0; round < rounds(); ++round) {
        const std::uint64_t seed = base_seed() + 2000 + static_cast<std::uint64_t>(round);
        Round r;
        std::vector<std::size_t> got(kPipes, 0);
        std::vector<char> intact(kPipes, 1);
        in_round("timed reads", round, seed, r, [&] {
            eddy::Runtime rt(config_of(round));
            rt.block_on(eddy::task_group([&](TaskGroup& g) -> Task<void> {
                Rng rng{seed};
                for (int i = 0; i < kPipes; ++i) {
                    auto [rd, wr] = eddy::io::pipe();
                    g.spawn(write_stream(std::move(wr), static_cast<std::uint64_t>(i), Rng{rng.next()}));
                    g.spawn([](eddy::io::FileDescriptor fd, std::uint64_t s, Rng rg, Round& rr, std::size_t& n,
                               char& ok) -> Task<void> {
                        bool fine = true;
                        co_await read_stream(std::move(fd), s, rg, rr, n, fine);
                        ok = fine ? 1 : 0;
                    }(std::move(rd), static_cast<std::uint64_t>(i), Rng{rng.next()}, r,
                                         got[static_cast<std::size_t>(i)], intact[static_cast<std::size_t>(i)]));
                }
                co_return;
            }));
        });
        for (int i = 0; i < kPipes; ++i) {
            CHECK(got[static_cast<std::size_t>(i)] == kStreamBytes);
            CHECK(intact[static_cast<std::size_t>(i)] == 1);
        }
        CHECK(r.frames.alive() == 0);
    }
}

TEST_CASE("destroying the runtime with groups, trees and timed reads in flight: no hang, leak or race") {
    for (int round = 0; round < 3 * rounds(); ++round) {
        const std::uint64_t seed = base_seed() + 3000 + static_cast<std::uint64_t>(round);
        Round r;
        in_round("shutdown", round, seed, r, [&] {
            eddy::Runtime rt(config_of(round));
            auto h = rt.spawn(all_sessions(seed, r, {}));
            std::this_thread::sleep_for(std::chrono::microseconds(Rng{seed}.below(4000)));
            h.detach();
        });  // the destructor destroys whatever had not finished
        CHECK(r.frames.alive() == 0);
    }
}
