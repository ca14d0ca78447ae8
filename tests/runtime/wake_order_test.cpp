// tests/runtime/wake_order_test.cpp: the order a worker keeps under load (runtime/worker.hpp,
// "The queues, and the order they keep"): woken tasks run oldest first, so a task woken
// early is not buried under the wake-ups that keep coming after it; spawned work still runs
// newest first, and neither kind starves the other.
//
// Every case runs on one worker and counts polls, not time: the test's own tasks count each
// resumption, so "how long a task waited" is the number of other polls between its wake-up
// and its own poll, the same on a quiet machine and on a loaded one. The order of wake-ups
// from outside the worker (the global wake queue, and shares of it) is wake_share_test.cpp's.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include <eddy/runtime/join_handle.hpp>
#include <eddy/sync/notify.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/task.hpp>

using eddy::JoinHandle;
using eddy::Notify;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;

namespace {

/// LIFO-slot runs a worker allows in a row while other tasks wait (kMaxLifoRuns), and tasks of
/// the global wake queue it runs in a row before one of its own (kMaxGlobalRun).
constexpr std::uint64_t kSlotRuns = 16;
constexpr std::uint64_t kGlobalRun = 16;
/// The bound of runtime/worker.hpp, per task woken before it and still queued (and one more).
constexpr std::uint64_t kPerTaskAhead = kSlotRuns + 2 * kGlobalRun + 3;
/// The build's local queues (-Dsmall_queues: 4 and 16 slots, so that overflow runs in every
/// test). The bound and the exact orders below hold while a worker's queues do not
/// overflow; with small queues these tests check that every task still runs.
#ifdef EDDY_LOCAL_QUEUE_CAPACITY
constexpr bool kSmallQueues = true;
#else
constexpr bool kSmallQueues = false;
#endif

/// Waiters woken by a producing pair, and what each wake-up became. One worker: no locks.
struct Stream {
    explicit Stream(std::size_t waiters) : w(waiters) {
        for (auto& x : w) x.notify = std::make_unique<Notify>();
    }
    struct Waiter {
        std::unique_ptr<Notify> notify;
        bool pending = false;        // woken, not yet run
        std::uint64_t woken_at = 0;  // `polls` at the wake-up
        std::uint64_t ahead = 0;     // woken waiters still queued at that moment
        std::uint64_t runs = 0;
    };
    std::vector<Waiter> w;
    std::uint64_t polls = 0;  // resumptions of the test's tasks so far
    std::size_t waiting = 0;  // waiters that have started waiting
    std::uint64_t wakes = 0;
    std::uint64_t pending = 0;
    std::uint64_t max_pending = 0;
    // What the checks found.
    std::uint64_t max_excess = 0;  // the worst (waited - allowed), 0 if none was late
    std::uint64_t max_waited = 0;
    bool stop = false;

    /// The producer wakes waiter `i`, if it waits (a waiter already woken only gets a
    /// permit, which makes no new wake-up).
    void wake(std::size_t i) {
        Waiter& x = w[i];
        if (!x.pending) {
            x.pending = true;
            x.woken_at = polls;
            ++wakes;
            x.ahead = pending++;
            if (pending > max_pending) max_pending = pending;
        }
        x.notify->notify_one();
    }
    /// Waiter `i` runs after its wake-up: checks the order and the bound.
    void ran(std::size_t i) {
        Waiter& x = w[i];
        ++polls;
        if (!x.pending) return;  // a stored permit, consumed without suspending
        x.pending = false;
        --pending;
        ++x.runs;
        // The bound of worker.hpp: for each task woken before it and still queued, and for
        // the slot chain running when it was woken, at most a slot chain, a spawned task and
        // the global wake-ups around it, and one poll.
        const std::uint64_t waited = polls - x.woken_at - 1;
        const std::uint64_t allowed = (x.ahead + 1) * kPerTaskAhead;
        if (waited > max_waited) max_waited = waited;
        if (waited > allowed && waited - allowed > max_excess) max_excess = waited - allowed;
    }
};

Task<void> waiter(Stream& s, std::size_t i) {
    ++s.waiting;
    while (!s.stop) {
        co_await s.w[i].notify->notified();
        s.ran(i);
    }
}

Task<void> marker(Stream& s, std::uint64_t& ran_at) {
    ran_at = ++s.polls;
    co_return;
}

/// One of a pair that wakes each other through the LIFO slot (as a request and its answer
/// do), each turn waking `per_turn` waiters first: a steady stream of wake-ups. With
/// `spawn_at`, it spawns a marker task on that turn (the marker's JoinHandle is dropped: it
/// runs detached, and notes when it ran in `ran_at`).
Task<void> producer(Stream& s, Notify& mine, Notify& other, std::size_t per_turn, std::uint64_t turns,
                    std::size_t first, std::uint64_t spawn_at = 0, std::uint64_t* spawned_at = nullptr,
                    std::uint64_t* ran_at = nullptr) {
    std::size_t next = first;
    for (std::uint64_t t = 0; t < turns; ++t) {
        ++s.polls;
        if (spawned_at != nullptr && t == spawn_at) {
            *spawned_at = s.polls;
            (void)eddy::spawn(marker(s, *ran_at));
        }
        for (std::size_t k = 0; k < per_turn; ++k) {
            s.wake(next);
            next = (next + 2) % s.w.size();  // the pair takes turns over the waiters
        }
        other.notify_one();
        co_await mine.notified();
    }
    other.notify_one();
}

}  // namespace

TEST_SUITE("runtime/wake_order") {

/// Runs the stream (1,000 waiters; a pair of producers waking 40 of them per turn for 5,000
/// turns: over a hundred woken tasks queue up) on one worker. With `remote`, a plain thread
/// meanwhile keeps waking 50 other tasks of the same worker: wake-ups through the global
/// queue, which run first (input first). Returns how many times those ran.
std::uint64_t run_stream(Stream& s, bool remote) {
    Runtime rt(RuntimeConfig{.workers = 1});
    std::vector<std::unique_ptr<Notify>> outside(remote ? 50 : 0);
    for (auto& n : outside) n = std::make_unique<Notify>();
    std::atomic<bool> done{false};
    std::uint64_t remote_runs = 0;
    std::thread waker;
    if (remote) {
        waker = std::thread([&] {
            // Rounds over all 50, a short pause between them: a steady flow, not a flood that
            // would slow a sanitizer build down for nothing.
            while (!done.load()) {
                for (auto& n : outside) n->notify_one();
                std::this_thread::sleep_for(std::chrono::microseconds(20));
            }
        });
    }
    rt.block_on([](Stream& stream, std::vector<std::unique_ptr<Notify>>& foreign, std::atomic<bool>& finished,
                   std::uint64_t& remote_count) -> Task<void> {
        std::vector<JoinHandle<void>> waiters;
        for (std::size_t i = 0; i < stream.w.size(); ++i) waiters.push_back(eddy::spawn(waiter(stream, i)));
        for (auto& n : foreign) {
            waiters.push_back(
                eddy::spawn([](Stream& st, Notify& notify, std::atomic<bool>& stop, std::uint64_t& runs) -> Task<void> {
                    while (!stop.load()) {
                        co_await notify.notified();
                        ++st.polls;  // one more poll on this worker between the stream's
                        ++runs;
                    }
                }(stream, *n, finished, remote_count)));
        }
        while (stream.waiting < stream.w.size()) co_await eddy::yield_now();
        Notify a, b;
        JoinHandle<void> pa = eddy::spawn(producer(stream, a, b, 40, 5'000, 0));
        JoinHandle<void> pb = eddy::spawn(producer(stream, b, a, 40, 5'000, 1));
        co_await std::move(pa);
        co_await std::move(pb);
        stream.stop = true;
        finished.store(true);
        for (auto& x : stream.w) x.notify->notify_one();
        for (auto& n : foreign) n->notify_one();
        for (auto& h : waiters) co_await std::move(h);
    }(s, outside, done, remote_runs));
    done.store(true);
    if (waker.joinable()) waker.join();
    return remote_runs;
}

void check_stream(const Stream& s) {
    INFO("wake-ups " << s.wakes << ", longest wait " << s.max_waited << " polls, longest queue " << s.max_pending);
    CHECK(s.wakes > 10'000);
    CHECK(s.max_pending > 100);  // the premise: a deep queue
    if (!kSmallQueues) CHECK(s.max_excess == 0);
    std::uint64_t starved = 0;
    for (const auto& x : s.w) starved += x.runs == 0 ? 1 : 0;
    CHECK(starved == 0);
}

TEST_CASE("under a steady stream of wake-ups every woken task runs within the bound") {
    // Before, the worker ran its newest task first: a task woken early sank under every
    // later one (11,648 polls, where the bound allows 51 per task ahead of it).
    Stream s(1000);
    (void)run_stream(s, false);
    check_stream(s);
}

TEST_CASE("the bound holds while another thread keeps waking tasks of the same worker") {
    // Those wake-ups come through the global queue and run first, at most 16 in a row.
    Stream s(1000);
    const std::uint64_t remote_runs = run_stream(s, true);
    INFO("the other thread's wake-ups ran " << remote_runs << " times");
    CHECK(remote_runs > 1'000);  // the premise: they competed with the stream
    check_stream(s);
}

TEST_CASE("tasks woken one by one in one poll run in that order, the last first (the LIFO slot)") {
    Runtime rt(RuntimeConfig{.workers = 1});
    std::vector<int> order;
    rt.block_on([](std::vector<int>& trace) -> Task<void> {
        constexpr int kN = 100;
        std::vector<std::unique_ptr<Notify>> n;
        std::vector<JoinHandle<void>> waiters;
        int waiting = 0;
        for (int i = 0; i < kN; ++i) {
            n.push_back(std::make_unique<Notify>());
            waiters.push_back(
                eddy::spawn([](Notify& notify, std::vector<int>& seq, int& parked, int index) -> Task<void> {
                    ++parked;
                    co_await notify.notified();
                    seq.push_back(index);
                }(*n.back(), trace, waiting, i)));
        }
        while (waiting < kN) co_await eddy::yield_now();
        for (auto& x : n) x->notify_one();
        for (auto& h : waiters) co_await std::move(h);
    }(order));
    std::vector<int> expected{99};
    for (int i = 0; i < 99; ++i) expected.push_back(i);
    if (kSmallQueues) {
        std::sort(order.begin(), order.end());
        std::sort(expected.begin(), expected.end());
    }
    CHECK(order == expected);
}

TEST_CASE("a task spawned under a steady stream of wake-ups runs within a slot chain or two") {
    // Woken and spawned tasks take turns: a spawned task does not wait for the stream of
    // wake-ups to dry up. A producer spawns it in the middle of the stream: it goes to the
    // LIFO slot, the wake-ups after it push it to the spawn deque, and the stream never
    // leaves the worker idle. (Before, it waited 6,440 polls.)
    Runtime rt(RuntimeConfig{.workers = 1});
    Stream s(1000);
    std::uint64_t spawned_at = 0;
    std::uint64_t ran_at = 0;
    rt.block_on([](Stream& stream, std::uint64_t& spawned, std::uint64_t& ran) -> Task<void> {
        std::vector<JoinHandle<void>> waiters;
        for (std::size_t i = 0; i < stream.w.size(); ++i) waiters.push_back(eddy::spawn(waiter(stream, i)));
        while (stream.waiting < stream.w.size()) co_await eddy::yield_now();
        Notify a, b;
        JoinHandle<void> pa = eddy::spawn(producer(stream, a, b, 4, 5'000, 0, 2'500, &spawned, &ran));
        JoinHandle<void> pb = eddy::spawn(producer(stream, b, a, 4, 5'000, 1));
        co_await std::move(pa);
        co_await std::move(pb);
        stream.stop = true;
        for (auto& x : stream.w) x.notify->notify_one();
        for (auto& h : waiters) co_await std::move(h);
    }(s, spawned_at, ran_at));
    INFO("the spawned task ran after " << ran_at - spawned_at - 1 << " polls");
    REQUIRE(spawned_at > 0);
    CHECK(ran_at > spawned_at);
    CHECK(ran_at - spawned_at - 1 <= 2 * (kSlotRuns + 2));
}

Task<std::uint64_t> fib(unsigned n) {
    if (n < 2) co_return n;
    auto [a, b] = co_await eddy::when_all(fib(n - 1), fib(n - 2));
    co_return a + b;
}

TEST_CASE("fork-join children still run depth first: a when_all tree never fills its worker's deque") {
    // Breadth first, fib(20)'s 21,891 calls would hold thousands of queued children and
    // overflow the 256-slot deque; depth first, at most one pending sibling per level.
    Runtime rt(RuntimeConfig{.workers = 1});
    CHECK(rt.block_on(fib(20)) == 6765);
    if (!kSmallQueues) CHECK(rt.metrics().workers[0].overflows == 0);
}

}  // TEST_SUITE("runtime/wake_order")
