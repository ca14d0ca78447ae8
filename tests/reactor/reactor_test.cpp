// tests/reactor/reactor_test.cpp: the reactor's edge cases, seen from the public API.
//
// - A tiny ring (RuntimeConfig::ring_entries = 4: SQ 4, CQ 16, or even 1) under a thousand
//   concurrent operations: the submission queue is full all the time and completions
//   overflow the completion queue; everything must still complete, with the right bytes.
// - A non-blocking descriptor that is not ready (EAGAIN) is polled, then retried.
// - ring_entries out of range is refused by the Runtime constructor.
// - Ping-pong over pipes between many tasks on several workers (the wake-up paths).
// - I/O awaited off a worker thread throws WrongThread.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <eddy/io/file_descriptor.hpp>
#include <eddy/io/pipe.hpp>
#include <eddy/io/read_write.hpp>
#include <eddy/time/sleep.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/this_worker.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/io_helpers.hpp"
#include "support/waiting.hpp"

using eddy::JoinHandle;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::test::wait_count;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kMessage = 64;

/// The bytes pair `i` sends: distinct per pair, so a crossed wire shows.
std::array<std::byte, kMessage> message_of(int i) {
    std::array<std::byte, kMessage> m;
    for (std::size_t k = 0; k < kMessage; ++k) m[k] = static_cast<std::byte>((i * 31 + static_cast<int>(k)) & 0xFF);
    return m;
}

Task<bool> read_and_check(int fd, int i) {
    std::array<std::byte, kMessage> buf{};
    const std::size_t n = co_await eddy::test::read_exact(fd, buf);
    co_return (n == kMessage && buf == message_of(i));
}

Task<bool> write_message(int fd, int i) {
    const auto m = message_of(i);
    co_await eddy::test::write_all(fd, m);
    co_return true;
}

/// `pairs` pipes, a reader and a writer on each, all at once; returns how many reads got the
/// right bytes. The readers are started first, so they are all pending in the kernel while the
/// writers' completions arrive.
Task<int> pipe_pairs(std::vector<eddy::io::Pipe>& pipes) {
    const int pairs = static_cast<int>(pipes.size());
    std::vector<JoinHandle<bool>> readers;
    readers.reserve(pipes.size());
    for (int i = 0; i < pairs; ++i) readers.push_back(eddy::spawn(read_and_check(pipes[i].read_end.get(), i)));
    std::vector<Task<bool>> writers;
    for (int i = 0; i < pairs; ++i) writers.push_back(write_message(pipes[i].write_end.get(), i));
    co_await eddy::when_all(std::move(writers));
    int ok = 0;
    for (auto& r : readers) ok += (co_await std::move(r)) ? 1 : 0;
    co_return ok;
}

/// How many pipe pairs fit in the descriptor limit (leaving room for the runtime and doctest).
int affordable_pairs(int wanted) {
    const std::size_t limit = eddy::test::raise_fd_limit(static_cast<std::size_t>(wanted) * 2 + 256);
    return std::min(wanted, static_cast<int>((limit - 128) / 2));
}

/// One side of a ping-pong: reads a counter from `in`, writes counter + 1 to `out`, `rounds`
/// times. The side that `starts` writes 0 first. Returns the last value it read.
Task<std::uint64_t> ping_pong(int in, int out, int rounds, bool starts, std::atomic<int>& workers_seen_mask) {
    std::uint64_t v = 0;
    if (starts) co_await eddy::test::write_all(out, std::as_bytes(std::span(&v, 1)));
    std::uint64_t last = 0;
    for (int r = 0; r < rounds; ++r) {
        const std::size_t n = co_await eddy::test::read_exact(in, std::as_writable_bytes(std::span(&v, 1)));
        if (n != sizeof v) throw std::runtime_error("ping_pong: short read");
        if (auto w = eddy::this_worker::index()) workers_seen_mask.fetch_or(1 << (*w % 16));
        last = v;
        ++v;
        if (!(starts && r == rounds - 1))  // the starter's last read ends the exchange
            co_await eddy::test::write_all(out, std::as_bytes(std::span(&v, 1)));
    }
    co_return last;
}

}  // namespace

TEST_SUITE("reactor/reactor") {

TEST_CASE("a 4-entry ring carries 1000 concurrent pipe reads and writes with the right bytes") {
    const int pairs = affordable_pairs(1000);
    CAPTURE(pairs);
    REQUIRE(pairs >= 200);
    std::vector<eddy::io::Pipe> pipes;
    for (int i = 0; i < pairs; ++i) pipes.push_back(eddy::io::pipe());
    Runtime rt(RuntimeConfig{.workers = 2, .ring_entries = 4});
    for (int round = 0; round < 3; ++round) {
        CAPTURE(round);
        CHECK(rt.block_on(pipe_pairs(pipes)) == pairs);
    }
    for (auto& p : pipes) CHECK_FALSE(eddy::test::readable_now(p.read_end.get()));  // nothing left over
}

TEST_CASE("a 1-entry ring still works (SQ 1, CQ 4)") {
    const int pairs = affordable_pairs(200);
    std::vector<eddy::io::Pipe> pipes;
    for (int i = 0; i < pairs; ++i) pipes.push_back(eddy::io::pipe());
    Runtime rt(RuntimeConfig{.workers = 2, .ring_entries = 1});
    CHECK(rt.block_on(pipe_pairs(pipes)) == pairs);
    CHECK(rt.block_on([]() -> Task<bool> {
        const auto start = Clock::now();
        co_await eddy::sleep(5ms);
        co_return Clock::now() - start >= 5ms;
    }()));
}

TEST_CASE("a 4-entry ring with 2000 sleeps and pipe I/O in flight at once") {
    const int pairs = affordable_pairs(500);
    std::vector<eddy::io::Pipe> pipes;
    for (int i = 0; i < pairs; ++i) pipes.push_back(eddy::io::pipe());
    Runtime rt(RuntimeConfig{.workers = 2, .ring_entries = 4});
    auto [io_ok, timers_ok] = rt.block_on(eddy::when_all(pipe_pairs(pipes), []() -> Task<int> {
        std::vector<Task<bool>> sleeps;
        for (int i = 0; i < 2000; ++i)
            sleeps.push_back([](std::chrono::milliseconds d) -> Task<bool> {
                const auto start = Clock::now();
                co_await eddy::sleep(d);
                co_return Clock::now() - start >= d;
            }(std::chrono::milliseconds(i % 7)));
        int ok = 0;
        for (bool b : co_await eddy::when_all(std::move(sleeps))) ok += b ? 1 : 0;
        co_return ok;
    }()));
    CHECK(io_ok == pairs);
    CHECK(timers_ok == 2000);
}

TEST_CASE("a non-blocking pipe that is empty is polled until data arrives") {
    Runtime rt(RuntimeConfig{.workers = 2});
    int fds[2];
    REQUIRE(::pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0);
    eddy::io::FileDescriptor rd(fds[0]);
    eddy::io::FileDescriptor wr(fds[1]);
    std::atomic<int> about{0};
    auto [got, wrote] = rt.block_on(eddy::when_all(
        [](int fd, std::atomic<int>& about_) -> Task<std::string> {
            std::array<std::byte, 16> buf{};
            about_.fetch_add(1);
            const std::size_t n = co_await eddy::io::read(fd, buf);  // EAGAIN at first: polled
            co_return std::string(reinterpret_cast<const char*>(buf.data()), n);
        }(rd.get(), about),
        [](int fd, std::atomic<int>& about_) -> Task<std::size_t> {
            while (about_.load() < 1) co_await eddy::sleep(1ms);
            co_await eddy::sleep(20ms);  // makes the EAGAIN path likely; correct either way
            co_return co_await eddy::io::write(fd, eddy::test::bytes_of("ready", 5));
        }(wr.get(), about)));
    CHECK(wrote == 5);
    CHECK(got == "ready");
    // Still non-blocking: the reactor did not change the descriptor's flags.
    CHECK((::fcntl(rd.get(), F_GETFL) & O_NONBLOCK) != 0);
}

TEST_CASE("a non-blocking pipe that is full is polled until there is room") {
    Runtime rt(RuntimeConfig{.workers = 2});
    int fds[2];
    REQUIRE(::pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0);
    eddy::io::FileDescriptor rd(fds[0]);
    eddy::io::FileDescriptor wr(fds[1]);
    std::vector<char> chunk(4096, 'f');
    std::size_t filled = 0;
    while (::write(wr.get(), chunk.data(), chunk.size()) > 0) filled += chunk.size();
    REQUIRE(filled > 0);
    std::atomic<int> about{0};
    auto [wrote, drained] = rt.block_on(eddy::when_all(
        [](int fd, std::atomic<int>& about_) -> Task<std::size_t> {
            about_.fetch_add(1);
            co_return co_await eddy::io::write(fd, eddy::test::bytes_of("tail", 4));  // EAGAIN: polled
        }(wr.get(), about),
        [](int fd, std::size_t expect, std::atomic<int>& about_) -> Task<std::size_t> {
            while (about_.load() < 1) co_await eddy::sleep(1ms);
            co_await eddy::sleep(20ms);
            std::vector<std::byte> buf(expect);
            co_return co_await eddy::test::read_exact(fd, buf);  // frees room for the writer
        }(rd.get(), filled, about)));
    CHECK(drained == filled);
    CHECK(wrote == 4);
    char tail[8] = {};
    CHECK(::read(rd.get(), tail, sizeof tail) == 4);  // the write completed: its bytes are in
    CHECK(std::string(tail, 4) == "tail");
}

TEST_CASE("ring_entries out of range is refused by the Runtime constructor") {
    CHECK_THROWS_AS(Runtime(RuntimeConfig{.workers = 1, .ring_entries = 0}), std::invalid_argument);
    CHECK_THROWS_AS(Runtime(RuntimeConfig{.workers = 1, .ring_entries = 40000}), std::invalid_argument);
    CHECK_THROWS_AS(Runtime(RuntimeConfig{.workers = 1, .ring_entries = 32769}), std::invalid_argument);
    try {
        Runtime rt(RuntimeConfig{.workers = 1, .ring_entries = 0});
        FAIL("no exception");
    } catch (const std::invalid_argument& e) {
        CHECK(std::string(e.what()).find("ring_entries") != std::string::npos);
    }
}

TEST_CASE("ring_entries at the ends of the documented range 1..32768 is accepted") {
    // The documentation promises 1..32768 (rounded up to a power of two, CQ four times as big).
    for (unsigned entries : {1u, 2u, 3u, 1000u, 16384u, 16385u, 32768u}) {
        CAPTURE(entries);
        try {
            Runtime rt(RuntimeConfig{.workers = 1, .ring_entries = entries});
            CHECK(rt.block_on([]() -> Task<int> {
                co_await eddy::sleep(1ms);
                co_return 7;
            }()) == 7);
        } catch (const std::exception& e) {
            FAIL_CHECK("Runtime with ring_entries = " << entries << " threw: " << std::string(e.what()));
        }
    }
}

TEST_CASE("an idle reactor with an operation pending still wakes for new work") {
    // The reactor sleeps in the kernel with a read pending and no timer; new work (a timer,
    // a cancel request from a plain thread) reaches it only through its wake-up descriptor.
    // Each round: wait until the read is in place and the reactor idles, then post more.
    Runtime rt(RuntimeConfig{.workers = 1});
    for (int round = 0; round < 10; ++round) {
        CAPTURE(round);
        auto p = eddy::io::pipe();
        std::stop_source source;
        std::atomic<int> about{0};
        JoinHandle<eddy::test::Outcome> reader =
            rt.spawn([](int fd, std::stop_token tok, std::atomic<int>& about_) -> Task<eddy::test::Outcome> {
                about_.fetch_add(1);
                co_return co_await eddy::test::outcome_of([](int fd_, std::stop_token t) -> Task<std::size_t> {
                    std::array<std::byte, 8> buf{};
                    co_return co_await eddy::io::read(fd_, buf, std::move(t));
                }(fd, std::move(tok)));
            }(p.read_end.get(), source.get_token(), about));
        REQUIRE(wait_count(about, 1));
        std::this_thread::sleep_for(10ms);  // let the reactor go idle (the case under test)
        JoinHandle<bool> timer = rt.spawn([]() -> Task<bool> {
            co_await eddy::sleep(1ms);
            co_return true;
        }());
        REQUIRE(eddy::test::wait_finished(timer));
        std::this_thread::sleep_for(10ms);
        source.request_stop();  // from this thread, not a worker
        REQUIRE(eddy::test::wait_finished(reader));
        CHECK(rt.block_on([](JoinHandle<eddy::test::Outcome> h) -> Task<eddy::test::Outcome> {
            co_return co_await std::move(h);
        }(std::move(reader))) == eddy::test::Outcome::canceled);
    }
}

TEST_CASE("ping-pong over pipes between many tasks on several workers") {
    constexpr int kPairs = 32;
    constexpr int kRounds = 300;
    Runtime rt(RuntimeConfig{.workers = 4});
    std::vector<eddy::io::Pipe> ab;
    std::vector<eddy::io::Pipe> ba;
    for (int i = 0; i < kPairs; ++i) {
        ab.push_back(eddy::io::pipe());
        ba.push_back(eddy::io::pipe());
    }
    std::atomic<int> seen{0};
    std::vector<Task<std::uint64_t>> sides;
    for (int i = 0; i < kPairs; ++i) {
        sides.push_back(ping_pong(ba[i].read_end.get(), ab[i].write_end.get(), kRounds, true, seen));
        sides.push_back(ping_pong(ab[i].read_end.get(), ba[i].write_end.get(), kRounds, false, seen));
    }
    const std::vector<std::uint64_t> last = rt.block_on(eddy::when_all(std::move(sides)));
    REQUIRE(last.size() == 2 * kPairs);
    for (int i = 0; i < kPairs; ++i) {
        CAPTURE(i);
        // Values alternate 0,1,2,...: the responder reads the even ones, the starter the odd.
        CHECK(last[2 * i] == 2 * kRounds - 1);
        CHECK(last[2 * i + 1] == 2 * kRounds - 2);
    }
    for (auto& p : ab) CHECK_FALSE(eddy::test::readable_now(p.read_end.get()));
    for (auto& p : ba) CHECK_FALSE(eddy::test::readable_now(p.read_end.get()));
    CHECK(std::popcount(static_cast<unsigned>(seen.load())) >= 2);  // more than one worker took part
}

TEST_CASE("many tasks each awaiting I/O complete with one resumption each") {
    // 500 pipes; each reader counts its resumptions; writers from the test thread.
    constexpr int kReaders = 500;
    const int n = affordable_pairs(kReaders);
    std::vector<eddy::io::Pipe> pipes;
    for (int i = 0; i < n; ++i) pipes.push_back(eddy::io::pipe());
    Runtime rt(RuntimeConfig{.workers = 2});
    std::atomic<int> waiting{0};
    std::atomic<int> done{0};
    std::vector<JoinHandle<int>> handles;
    for (int i = 0; i < n; ++i)
        handles.push_back(rt.spawn([](int fd, std::atomic<int>& waiting_, std::atomic<int>& done_) -> Task<int> {
            char c = 0;
            waiting_.fetch_add(1);
            const std::size_t got = co_await eddy::io::read(fd, std::as_writable_bytes(std::span(&c, 1)));
            done_.fetch_add(1);
            co_return got == 1 ? c : -1;
        }(pipes[i].read_end.get(), waiting, done)));
    REQUIRE(wait_count(waiting, n));
    for (int i = 0; i < n; ++i) {
        const char c = static_cast<char>('a' + i % 26);
        REQUIRE(::write(pipes[i].write_end.get(), &c, 1) == 1);
    }
    REQUIRE(wait_count(done, n));
    int right = 0;
    for (int i = 0; i < n; ++i)
        right += rt.block_on([](JoinHandle<int> h) -> Task<int> {
            co_return co_await std::move(h);
        }(std::move(handles[i]))) == 'a' + i % 26
                     ? 1
                     : 0;
    CHECK(right == n);
    CHECK(done.load() == n);
}

TEST_CASE("end of file and errors come back from the reactor") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto p = eddy::io::pipe();
    p.write_end.close();
    CHECK(rt.block_on([](int fd) -> Task<std::size_t> {
        std::array<std::byte, 8> buf{};
        co_return co_await eddy::io::read(fd, buf);
    }(p.read_end.get())) == 0);
    // EBADF on a closed descriptor number.
    const int bad = p.read_end.get();
    p.read_end.close();
    try {
        rt.block_on([](int fd) -> Task<std::size_t> {
            std::array<std::byte, 8> buf{};
            co_return co_await eddy::io::read(fd, buf);
        }(bad));
        FAIL("no exception");
    } catch (const std::system_error& e) {
        CHECK(e.code() == std::errc::bad_file_descriptor);
    }
}

TEST_CASE("awaiting I/O off a worker thread throws WrongThread") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto p = eddy::io::pipe();
    bool threw = false;
    bool other = false;
    [](int fd, bool& threw_, bool& other_) -> eddy::test::Eager {
        std::array<std::byte, 4> buf{};
        try {
            (void)co_await eddy::io::read(fd, buf);
        } catch (const eddy::WrongThread&) {
            threw_ = true;
        } catch (...) {
            other_ = true;
        }
    }(p.read_end.get(), threw, other);
    CHECK(threw);
    CHECK_FALSE(other);
    CHECK_FALSE(eddy::test::readable_now(p.read_end.get()));
}

}  // TEST_SUITE("reactor/reactor")
