// tests/runtime/coop_test.cpp: the cooperative budget (eddy/runtime/coop.hpp). A task whose
// operations are always ready gives its worker back, the operation that made it yield keeps
// its result, and unconstrained() / consume_budget() / remaining_budget() do what they say.
//
// The starvation cases: one worker, a task looping on an always-ready operation, and a second
// task sleeping 10 ms in a loop meanwhile; the loop runs until the sleeper has woken 30
// times (without the budget it never woke: the loop would run to its 20 s limit). The
// sleeper's lateness is counted in the worker thread's CPU time, from the loop's first
// operation after the sleeper was due to the sleeper running: the work the worker did
// instead of running it. Wall time would also count the time the OS gave the thread to
// other programs, which a loaded machine makes as long as it likes.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <eddy/fs/file.hpp>
#include <eddy/time/sleep.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/net/tcp_stream.hpp>
#include <eddy/sync/channel.hpp>
#include <eddy/runtime/coop.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/metrics.hpp>
#include <eddy/sync/mutex.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/task.hpp>

#include "support/net_helpers.hpp"

using eddy::JoinHandle;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

constexpr int kWakeups = 30;  // the sleeper's wake-ups the loop runs for

/// CPU time of the calling thread.
std::chrono::nanoseconds thread_cpu() {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

/// Shared by the loop and the sleeper, which run on the same (only) worker thread.
struct Starvation {
    int wakeups = 0;                                     // sleeps of 10 ms completed
    Clock::time_point due = Clock::time_point::max();    // the sleeper's current wake time
    std::optional<std::chrono::nanoseconds> cpu_at_due;  // set by the loop's first op after `due`
    std::chrono::nanoseconds worst_late{};               // the worker's CPU time while the sleeper was due
    std::uint64_t busy_ops = 0;                          // operations the loop completed
};

Task<void> sleeper(const std::atomic<bool>& stop, Starvation& s) {
    while (!stop.load()) {
        s.cpu_at_due.reset();
        s.due = Clock::now() + 10ms;
        co_await eddy::sleep(10ms);
        if (s.cpu_at_due) s.worst_late = std::max(s.worst_late, thread_cpu() - *s.cpu_at_due);
        s.due = Clock::time_point::max();
        ++s.wakeups;
    }
}

/// Runs `op()` (a Task) in a loop on the calling worker until a sleeper beside it has woken
/// kWakeups times, or for 20 s.
template <class Op>
Task<void> starve(Op op, Starvation& out) {
    std::atomic<bool> stop{false};
    JoinHandle<void> s = eddy::spawn(sleeper(stop, out));
    const auto give_up = Clock::now() + 20s;
    while (out.wakeups < kWakeups && Clock::now() < give_up) {
        co_await op();
        ++out.busy_ops;
        if (!out.cpu_at_due && Clock::now() >= out.due) out.cpu_at_due = thread_cpu();
    }
    stop.store(true);
    co_await std::move(s);
}

void check_not_starved(const Starvation& r, Runtime& rt) {
    INFO("wakeups=" << r.wakeups << " worst_late_cpu_us="
                    << std::chrono::duration_cast<std::chrono::microseconds>(r.worst_late).count()
                    << " busy_ops=" << r.busy_ops);
    CHECK(r.wakeups >= kWakeups);  // the sleeper ran while the loop did
    CHECK(r.busy_ops > 1000);      // and the loop really ran on ready operations
    CHECK(r.worst_late < 100ms);   // about a budget's worth of operations: well under 1 ms
    CHECK(rt.metrics().total(&eddy::WorkerMetrics::budget_yields) > 0);
}

std::string temp_file_with(std::size_t bytes) {
    char path[] = "/tmp/eddy-coop-XXXXXX";
    const int fd = ::mkstemp(path);
    REQUIRE(fd >= 0);
    const std::vector<char> data(bytes, 'x');
    REQUIRE(::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size()));
    ::close(fd);
    return path;
}

}  // namespace

TEST_CASE("a loop on reads of a cached file does not starve a sleeper on its worker") {
    const std::string path = temp_file_with(4096);
    Runtime rt(RuntimeConfig{.workers = 1});
    int short_reads = 0;
    Starvation r;
    rt.block_on([](std::string file_path, int& shorts, Starvation& starv) -> Task<void> {
        eddy::fs::File f = co_await eddy::fs::File::open(file_path);
        std::vector<std::byte> buf(512);
        co_await starve(
            [&]() -> Task<void> {
                if (co_await f.read_at(buf, 0) != buf.size()) ++shorts;
            },
            starv);
    }(path, short_reads, r));
    ::unlink(path.c_str());
    check_not_starved(r, rt);
    CHECK(short_reads == 0);
}

TEST_CASE("a loop on reads of a socket a plain thread keeps full does not starve a sleeper") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4());
    std::atomic<bool> done{false};
    Starvation r;
    rt.block_on([](eddy::net::TcpListener& l, std::atomic<bool>& stop_flag, Starvation& starv) -> Task<void> {
        eddy::test::Connection c = co_await eddy::test::connect_pair(l);
        const int fd = c.client.native_handle();
        std::thread writer([fd, &stop_flag] {
            const std::vector<char> chunk(1 << 16, 'y');
            while (!stop_flag.load()) {
                if (::send(fd, chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
                    std::this_thread::sleep_for(20us);  // full: the reader catches up
            }
        });
        // Let the writer fill the socket first: then reads find data at once.
        std::this_thread::sleep_for(50ms);
        std::vector<std::byte> buf(64);
        co_await starve([&]() -> Task<void> { (void)co_await c.server.read(buf); }, starv);
        stop_flag.store(true);
        writer.join();
    }(listener, done, r));
    check_not_starved(r, rt);
}

TEST_CASE("a loop on an uncontended Mutex does not starve a sleeper") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::Mutex m;
    Starvation r;
    rt.block_on(starve([&]() -> Task<void> { eddy::MutexGuard g = co_await m.lock(); }, r));
    check_not_starved(r, rt);
}

TEST_CASE("a loop on Channel::receive fed by a plain thread does not starve a sleeper") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::Channel<std::uint64_t> ch(1 << 16);
    std::atomic<bool> done{false};
    std::uint64_t next_expected = 0;
    bool in_order = true;
    // The producer keeps the channel full from outside the runtime (try_send: any thread).
    std::thread producer([&] {
        std::uint64_t v = 0;
        while (!done.load()) {
            std::uint64_t item = v;
            if (ch.try_send(std::move(item))) ++v;
            else std::this_thread::yield();
        }
    });
    while (ch.size() < (1 << 15)) std::this_thread::yield();  // a head start
    Starvation r;
    rt.block_on(starve(
        [&]() -> Task<void> {
            const std::optional<std::uint64_t> v = co_await ch.receive();
            in_order = in_order && v.has_value() && *v == next_expected;
            ++next_expected;
        },
        r));
    done.store(true);
    producer.join();
    check_not_starved(r, rt);
    CHECK(in_order);  // a receive that made the task yield kept its item: none lost or repeated
}

TEST_CASE("the operation that spends the budget keeps its result: a prefilled channel drains in order") {
    Runtime rt(RuntimeConfig{.workers = 1});
    constexpr std::uint64_t kItems = 10'000;
    eddy::Channel<std::uint64_t> ch(kItems);
    for (std::uint64_t i = 0; i < kItems; ++i) {
        std::uint64_t v = i;
        REQUIRE(ch.try_send(std::move(v)));
    }
    const std::uint64_t yields_before = rt.metrics().total(&eddy::WorkerMetrics::budget_yields);
    const bool ok = rt.block_on([](eddy::Channel<std::uint64_t>& chan) -> Task<bool> {
        for (std::uint64_t i = 0; i < kItems; ++i) {
            const std::optional<std::uint64_t> v = co_await chan.receive();
            if (!v || *v != i) co_return false;
        }
        co_return chan.size() == 0;
    }(ch));
    CHECK(ok);
    // One yield per 128 ready receives.
    CHECK(rt.metrics().total(&eddy::WorkerMetrics::budget_yields) - yields_before >=
          kItems / eddy::detail::kCoopBudget);
}

namespace {

Task<void> set_flag(std::atomic<bool>& flag) {
    flag.store(true);
    co_return;
}

/// On one worker: spawns a child (it waits in the LIFO slot until this task suspends or
/// yields), then runs `n` ready operations; reports how many had completed when the child ran
/// (n if it had not run by the end).
Task<int> child_runs_after(int n, bool unconstrained) {
    std::atomic<bool> child_ran{false};
    JoinHandle<void> child = eddy::spawn(set_flag(child_ran));
    int ran_at = n;
    auto body = [&]() -> Task<void> {
        for (int i = 0; i < n; ++i) {
            if (child_ran.load() && ran_at == n) ran_at = i;
            co_await eddy::sleep(0ms);  // due at once: a ready operation
        }
    };
    if (unconstrained) co_await eddy::coop::unconstrained(body());
    else co_await body();
    co_await std::move(child);
    co_return ran_at;
}

}  // namespace

TEST_CASE("the budget makes a task yield after 128 ready operations; unconstrained() never does") {
    Runtime rt(RuntimeConfig{.workers = 1});
    const int budgeted = rt.block_on(child_runs_after(1000, false));
    CHECK(budgeted > 0);
    CHECK(budgeted <= static_cast<int>(eddy::detail::kCoopBudget));
    CHECK(rt.block_on(child_runs_after(1000, true)) == 1000);
}

TEST_CASE("unconstrained() reaches when_all children; the budget is back afterwards") {
    Runtime rt(RuntimeConfig{.workers = 1});
    const auto result = rt.block_on([]() -> Task<std::vector<std::optional<std::uint32_t>>> {
        std::vector<std::optional<std::uint32_t>> seen;
        auto remaining = []() -> Task<std::optional<std::uint32_t>> {
            co_return co_await eddy::coop::remaining_budget();
        };
        seen.push_back(co_await eddy::coop::unconstrained(remaining()));
        auto [a, b] = co_await eddy::coop::unconstrained(eddy::when_all(remaining(), remaining()));
        seen.push_back(a);
        seen.push_back(b);
        co_await eddy::yield_now();  // a fresh poll
        seen.push_back(co_await eddy::coop::remaining_budget());
        co_return seen;
    }());
    REQUIRE(result.size() == 4);
    CHECK_FALSE(result[0].has_value());
    CHECK_FALSE(result[1].has_value());
    CHECK_FALSE(result[2].has_value());
    REQUIRE(result[3].has_value());
    CHECK(*result[3] == eddy::detail::kCoopBudget);
}

TEST_CASE("remaining_budget counts down with ready operations and consume_budget; a new poll refills") {
    Runtime rt(RuntimeConfig{.workers = 1});
    const auto r = rt.block_on([]() -> Task<std::vector<std::uint32_t>> {
        std::vector<std::uint32_t> seen;
        co_await eddy::yield_now();
        seen.push_back((co_await eddy::coop::remaining_budget()).value_or(0));
        co_await eddy::sleep(0ms);
        co_await eddy::coop::consume_budget();
        seen.push_back((co_await eddy::coop::remaining_budget()).value_or(0));
        co_await eddy::sleep(5ms);  // really suspends: a new poll when it wakes
        seen.push_back((co_await eddy::coop::remaining_budget()).value_or(0));
        co_return seen;
    }());
    REQUIRE(r.size() == 3);
    CHECK(r[0] == eddy::detail::kCoopBudget);
    CHECK(r[1] == eddy::detail::kCoopBudget - 2);
    CHECK(r[2] == eddy::detail::kCoopBudget);
}

TEST_CASE("consume_budget makes a pure computation loop yield to a spawned task") {
    Runtime rt(RuntimeConfig{.workers = 1});
    const int ran_at = rt.block_on([]() -> Task<int> {
        std::atomic<bool> child_ran{false};
        JoinHandle<void> child = eddy::spawn(set_flag(child_ran));
        int first_run = -1;
        for (int i = 0; i < 10'000 && first_run < 0; ++i) {
            if (child_ran.load()) first_run = i;
            co_await eddy::coop::consume_budget();
        }
        co_await std::move(child);
        co_return first_run;
    }());
    CHECK(ran_at > 0);
    CHECK(ran_at <= static_cast<int>(eddy::detail::kCoopBudget));
}

TEST_CASE("off a worker the budget is unlimited") {
    // A plain thread awaiting nothing: the thread-local says so.
    CHECK(eddy::detail::t_coop_budget == eddy::detail::kCoopUnlimited);
}
