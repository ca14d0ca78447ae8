// tests/stress/readiness_stress_test.cpp: io::readable waits raced by timeouts while a plain
// thread writes (eddy/io/readiness.hpp). Readiness consumes nothing, so however the waits and
// their cancellations interleave, every byte written is read exactly once and in order; and
// the cancellations really happen.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <eddy/io/readiness.hpp>
#include <eddy/time/with_timeout.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/stress_env.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using namespace std::chrono_literals;

namespace {

constexpr int kPipes = 32;
constexpr auto kTraffic = 300ms;

struct Stream {
    int r = -1, w = -1;
    std::uint64_t written = 0;  // bytes, by the writer thread (read after it is joined)
    std::uint64_t read = 0;     // bytes, by the reader task
    bool in_order = true;
    Stream() {
        int fds[2];
        REQUIRE(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0);
        r = fds[0];
        w = fds[1];
    }
    ~Stream() {
        if (r >= 0) ::close(r);
        if (w >= 0) ::close(w);
    }
};

/// Byte i of every stream.
unsigned char byte_at(std::uint64_t i) { return static_cast<unsigned char>(i * 131 + (i >> 8)); }

Task<unsigned> wait_readable(int fd) { co_return co_await eddy::io::readable(fd); }

/// Waits for data under random short timeouts, then reads what is there, until end of stream.
Task<void> reader(Stream& s, std::uint32_t seed, std::atomic<long>& timeouts) {
    std::minstd_rand rng(seed);
    std::array<unsigned char, 512> buf{};
    for (;;) {
        try {
            (void)co_await eddy::with_timeout(wait_readable(s.r), std::chrono::microseconds(rng() % 2000));
        } catch (const eddy::TimedOut&) {
            timeouts.fetch_add(1, std::memory_order_relaxed);
            continue;
        }
        for (;;) {
            const ssize_t n = ::read(s.r, buf.data(), buf.size());
            if (n == 0) co_return;  // the writer closed its end and everything was read
            if (n < 0) break;       // EAGAIN: wait again
            for (ssize_t i = 0; i < n; ++i)
                s.in_order =
                    s.in_order && buf[static_cast<std::size_t>(i)] == byte_at(s.read + static_cast<std::uint64_t>(i));
            s.read += static_cast<std::uint64_t>(n);
        }
    }
}

Task<void> read_all(std::vector<std::unique_ptr<Stream>>& streams, std::uint32_t seed, std::atomic<long>& timeouts) {
    std::vector<Task<void>> all;
    for (std::size_t i = 0; i < streams.size(); ++i)
        all.push_back(reader(*streams[i], seed + static_cast<std::uint32_t>(i), timeouts));
    co_await eddy::when_all(std::move(all));
}

}  // namespace

TEST_CASE("readiness waits cancelled at random by timeouts while a thread writes: every byte read once, in order") {
    const std::size_t defaults[] = {1, 2, 4};
    long total_timeouts = 0;
    std::uint64_t total_bytes = 0;
    std::random_device rd;
    for (std::size_t workers : eddy::test::stress_worker_counts(defaults)) {
        const std::uint32_t seed = rd();
        CAPTURE(workers);
        CAPTURE(seed);
        std::vector<std::unique_ptr<Stream>> streams;
        for (int i = 0; i < kPipes; ++i) streams.push_back(std::make_unique<Stream>());
        std::atomic<long> timeouts{0};
        {
            Runtime rt(RuntimeConfig{.workers = workers});
            auto readers = rt.spawn(read_all(streams, seed, timeouts));
            std::thread writer([&streams, seed] {
                std::minstd_rand rng(seed ^ 0x5bd1e995u);
                std::array<unsigned char, 1024> chunk{};
                const auto end = std::chrono::steady_clock::now() + kTraffic;
                while (std::chrono::steady_clock::now() < end) {
                    Stream& s = *streams[rng() % streams.size()];
                    const std::size_t len = 1 + rng() % chunk.size();
                    for (std::size_t i = 0; i < len; ++i) chunk[i] = byte_at(s.written + i);
                    const ssize_t n = ::write(s.w, chunk.data(), len);
                    if (n > 0) s.written += static_cast<std::uint64_t>(n);
                    if (rng() % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 500));
                }
                for (auto& s : streams) {
                    ::close(s->w);
                    s->w = -1;
                }
            });
            writer.join();
            rt.block_on([](eddy::JoinHandle<void> h) -> Task<void> { co_await std::move(h); }(std::move(readers)));
        }
        for (const auto& s : streams) {
            CHECK(s->read == s->written);
            CHECK(s->in_order);
            total_bytes += s->read;
        }
        total_timeouts += timeouts.load();
    }
    MESSAGE(total_bytes << " bytes read; " << total_timeouts << " readiness waits cancelled by their timeout");
    CHECK(total_timeouts > 0);
}
