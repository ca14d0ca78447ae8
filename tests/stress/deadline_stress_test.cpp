// tests/stress/deadline_stress_test.cpp: many tasks with random short deadlines (eddy::
// with_deadline) racing their data, on several workers and a small ring (the SQ fills, so an
// operation and its link timeout must still go together). Each task reads one byte from a
// pipe (an io_uring operation linked to a LINK_TIMEOUT) or a Unix socket (a one-shot poll
// linked the same way) while a sibling writes it after a random delay. Every read either
// gives its byte or throws TimedOut, never hangs; a read that timed out consumed nothing
// (the byte is still there); both outcomes happen; nothing is left in flight afterwards.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <eddy/eddy.hpp>

#include "support/net_helpers.hpp"
#include "support/stress_env.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using namespace std::chrono_literals;

namespace {

constexpr int kTasks = 96;  // at once (two descriptors each)
constexpr int kRounds = 12;

struct Tally {
    std::atomic<int> values{0};
    std::atomic<int> timed_out{0};
    std::atomic<int> lost{0};  // a timed-out read whose byte is gone: must stay 0
};

/// One racer: `rd`/`wr` are a pipe's ends or a socketpair's; `sock` says which read to use.
Task<void> racer(int rd, int wr, eddy::net::UnixStream* sock, std::chrono::microseconds deadline,
                 std::chrono::microseconds delay, Tally& tally) {
    std::array<std::byte, 1> buf{};
    auto reader = [](int fd, eddy::net::UnixStream* stream, std::span<std::byte> b) -> Task<std::size_t> {
        if (stream != nullptr) co_return co_await stream->read(b);
        co_return co_await eddy::io::read(fd, b);
    };
    auto writer = [](int fd, std::chrono::microseconds after) -> Task<void> {
        if (after > 0us) co_await eddy::sleep(after);
        const char c = 'q';
        REQUIRE(::write(fd, &c, 1) == 1);
    };
    auto guarded = [](auto reader_task, std::chrono::microseconds d) -> Task<int> {
        try {
            co_return static_cast<int>(co_await eddy::with_deadline(d, std::move(reader_task)));
        } catch (const eddy::TimedOut&) {
            co_return -1;
        }
    };
    auto [n, unit] = co_await eddy::when_all(guarded(reader(rd, sock, buf), deadline), writer(wr, delay));
    (void)unit;
    if (n == 1) {
        tally.values.fetch_add(1, std::memory_order_relaxed);  // counters: joined before read
        co_return;
    }
    tally.timed_out.fetch_add(1, std::memory_order_relaxed);
    // The byte must still be there: a read that timed out took nothing.
    char c = 0;
    if (::recv(rd, &c, 1, MSG_DONTWAIT) != 1 && ::read(rd, &c, 1) != 1)
        tally.lost.fetch_add(1, std::memory_order_relaxed);
}

Task<void> round(std::mt19937& rng, Tally& tally) {
    std::vector<eddy::io::Pipe> pipes;
    std::vector<std::pair<eddy::net::UnixStream, eddy::net::UnixStream>> socks;
    pipes.reserve(kTasks);
    socks.reserve(kTasks);
    std::vector<Task<void>> tasks;
    std::uniform_int_distribution<int> us(0, 4000);
    for (int i = 0; i < kTasks; ++i) {
        // A quarter with a far deadline (their value is certain), the rest racing.
        const auto deadline = i % 4 == 0 ? std::chrono::microseconds(10s) : std::chrono::microseconds(us(rng));
        const auto delay = std::chrono::microseconds(us(rng));
        if (i % 2 == 0) {
            pipes.push_back(eddy::io::pipe());
            // Non-blocking for the fallback read above; the op path polls on -EAGAIN, linked too.
            ::fcntl(pipes.back().read_end.get(), F_SETFL, O_NONBLOCK);
            tasks.push_back(
                racer(pipes.back().read_end.get(), pipes.back().write_end.get(), nullptr, deadline, delay, tally));
        } else {
            socks.push_back(eddy::net::UnixStream::pair());
            auto& s = socks.back();
            tasks.push_back(racer(s.first.native_handle(), s.second.native_handle(), &s.first, deadline, delay, tally));
        }
    }
    co_await eddy::when_all(std::move(tasks));
}

}  // namespace

TEST_CASE("with_deadline stress: reads racing random deadlines give their byte or TimedOut, lose nothing, never hang") {
    const std::size_t defaults[] = {2, 4};
    for (std::size_t workers : eddy::test::stress_worker_counts(defaults)) {
        CAPTURE(workers);
        Runtime rt(RuntimeConfig{.workers = workers, .ring_entries = 8});
        Tally tally;
        std::mt19937 rng(static_cast<unsigned>(workers) * 7919u);
        for (int r = 0; r < kRounds; ++r) eddy::test::run(rt, round(rng, tally));
        MESSAGE("workers " << workers << ": " << tally.values.load() << " values, " << tally.timed_out.load()
                           << " timed out");
        CHECK(tally.lost.load() == 0);
        CHECK(tally.values.load() + tally.timed_out.load() == kTasks * kRounds);
        CHECK(tally.values.load() >= kTasks * kRounds / 4);
        CHECK(tally.timed_out.load() > 0);
        const auto limit = std::chrono::steady_clock::now() + 5s;
        while (rt.metrics().reactor.in_flight > 1 && std::chrono::steady_clock::now() < limit)
            std::this_thread::sleep_for(1ms);
        CHECK(rt.metrics().reactor.in_flight <= 1);  // the reactor's own wake-up read at most
    }
}
