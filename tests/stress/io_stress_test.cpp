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
//
// The workloads live in tests/stress/io_workloads/: bookkeeping.hpp (knobs, randomness, the
// round's counters and the round loop), duplex.hpp (the byte streams), echo.hpp (case 1),
// cancel.hpp (case 2) and timers.hpp (case 3); case 4 runs all three at once.
#include <eddy/io/pipe.hpp>
#include <eddy/io/read_write.hpp>
#include <eddy/net/socket_addr.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/runtime/config.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/tasks/task.hpp>
#include <eddy/time/sleep.hpp>

#include "stress/io_workloads/bookkeeping.hpp"
#include "stress/io_workloads/cancel.hpp"
#include "stress/io_workloads/duplex.hpp"
#include "stress/io_workloads/echo.hpp"
#include "stress/io_workloads/timers.hpp"
#include "support/counted.hpp"
#include "support/io_helpers.hpp"

#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

using eddy::JoinHandle;
using eddy::Task;
using eddy::test::Counted;
using eddy::test::Outcome;
using namespace eddy::test::io_stress;
using namespace std::chrono_literals;

namespace {

/// Spawns every task in `tasks`, awaits them all.
Task<void> run_all(std::vector<Task<void>> tasks) {
    std::vector<JoinHandle<void>> handles;
    for (auto& t : tasks) handles.push_back(eddy::spawn(std::move(t)));
    for (auto& h : handles) co_await std::move(h);
}

/// Awaits `h` (of a runtime that may be gone) and classifies how its task ended.
Task<Outcome> classify(JoinHandle<void> h) { co_return co_await eddy::test::join_outcome(std::move(h)); }

}  // namespace

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
                tasks.push_back(cancellable_reader(ctx, ctx.life(), std::move(s.reader_end), board, 2 * i + 1, s.stream,
                                                   s.read, Rng{r.next()}));
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
    MESSAGE(total_bytes << " bytes checked; cancelled reads: " << total_read_cancels
                        << ", writes: " << total_write_cancels << ", accepts: " << total_accept_cancels);
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
            echo_planned =
                rt.block_on([](JoinHandle<long> h) -> Task<long> { co_return co_await std::move(h); }(std::move(echo)));
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

}  // TEST_SUITE("stress/io_stress")
