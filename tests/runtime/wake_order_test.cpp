// tests/runtime/wake_order_test.cpp: the order a worker keeps under load (runtime/worker.hpp,
// "The queues, and the order they keep"): woken tasks run oldest first, so a task woken
// early is not buried under the wake-ups that keep coming after it; spawned work still runs
// newest first, and neither kind starves the other.
//
// Every case runs on one worker and counts polls, not time: the test's own tasks count each
// resumption, so "how long a task waited" is the number of other polls between its wake-up
// and its own poll, the same on a quiet machine and on a loaded one. One case runs on two,
// a share of the global wake queue stolen in part: gates held by its tasks fix the order of
// every step, and it checks the order in which the tasks ran.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <eddy/runtime/join_handle.hpp>
#include <eddy/sync/notify.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/this_worker.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/task.hpp>
#include <eddy/time/sleep.hpp>

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

/// Holds its worker (no suspension) until `go`: another thread queues wake-ups meanwhile.
void hold(std::atomic<bool>& holding, const std::atomic<bool>& go) {
    holding.store(true, std::memory_order_release);  // pairs with the feeder's acquire loads
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
}

/// Waits for its Notify once, then notes its index in the order the worker ran it; with
/// `gate`, holds the worker until the gate opens before that.
Task<void> one_shot(Notify& n, std::atomic<std::size_t>& waiting, std::vector<std::size_t>& order, std::size_t i,
                    std::atomic<bool>* holding = nullptr, const std::atomic<bool>* gate = nullptr) {
    waiting.fetch_add(1, std::memory_order_relaxed);
    co_await n.notified();
    if (gate != nullptr) hold(*holding, *gate);
    order.push_back(i);  // one worker: only it writes
}

TEST_CASE("wake-ups from another thread run in the order they came, a share pulled into the wake queue too") {
    // The worker runs kGlobalRun of the global wake queue's tasks, then, with nothing of its
    // own, pulls the rest into its wake queue (a share). Before, the tasks woken after that
    // ran ahead of the share, kGlobalRun of them for each of its tasks: a static-file
    // server's woken connections waited up to 25 ms at one worker. Two gates make the
    // interleaving certain: the first batch is queued while the worker is held, and the
    // second while the share's first task holds it.
    constexpr std::size_t kFirst = 100, kAll = 200;
    std::vector<std::unique_ptr<Notify>> notes;
    for (std::size_t i = 0; i < kAll; ++i) notes.push_back(std::make_unique<Notify>());
    std::vector<std::size_t> order;
    order.reserve(kAll);
    std::atomic<std::size_t> waiting{0};
    std::atomic<bool> held_first{false}, first_queued{false}, held_share{false}, rest_queued{false};
    std::thread feeder([&] {
        while (!held_first.load(std::memory_order_acquire)) std::this_thread::yield();
        for (std::size_t i = 0; i < kFirst; ++i) notes[i]->notify_one();
        first_queued.store(true, std::memory_order_release);
        while (!held_share.load(std::memory_order_acquire)) std::this_thread::yield();
        for (std::size_t i = kFirst; i < kAll; ++i) notes[i]->notify_one();
        rest_queued.store(true, std::memory_order_release);
    });
    Runtime rt(RuntimeConfig{.workers = 1});
    rt.block_on([&]() -> Task<void> {
        std::vector<JoinHandle<void>> waiters;
        for (std::size_t i = 0; i < kAll; ++i) {
            const bool first_of_share = i == kGlobalRun;  // the share's first task holds the worker
            waiters.push_back(eddy::spawn(one_shot(*notes[i], waiting, order, i, first_of_share ? &held_share : nullptr,
                                                   first_of_share ? &rest_queued : nullptr)));
        }
        while (waiting.load(std::memory_order_relaxed) < kAll) co_await eddy::yield_now();
        hold(held_first, first_queued);
        for (auto& h : waiters) co_await std::move(h);
    }());
    feeder.join();
    REQUIRE(order.size() == kAll);
    std::size_t out_of_order = 0, first = kAll;
    for (std::size_t i = 0; i < kAll; ++i) {
        if (order[i] == i) continue;
        ++out_of_order;
        if (first == kAll) first = i;
    }
    INFO("the first task out of order ran " << first << "th: task " << (first < kAll ? order[first] : 0));
    CHECK(out_of_order == 0);
}

/// Waits for its Notify once, then wakes every task of `next` (on the worker: each into
/// the LIFO slot, displacing the one before into the wake queue), and notes its index.
Task<void> waker(Notify& n, std::atomic<std::size_t>& waiting, std::vector<std::size_t>& order, std::size_t i,
                 std::vector<std::unique_ptr<Notify>>& next) {
    waiting.fetch_add(1, std::memory_order_relaxed);
    co_await n.notified();
    for (auto& x : next) x->notify_one();
    order.push_back(i);
}

TEST_CASE("the older half of an overflowing wake queue runs before the rest of a share pulled into it") {
    // The worker pulls a share of the global wake queue that fills its wake queue; the
    // share's first task wakes three tasks here, and the second displaced one overflows it:
    // the older half (the share's oldest) moves to the global wake queue, which runs first
    // (worker.hpp, "The bound"). Counting that half as still pulled kept the worker off the
    // global queue until it had run every younger task of its own: the oldest wake-ups ran
    // last, after the share's youngest and after the three woken by its first task.
    constexpr std::size_t kWakeQueue = kSmallQueues ? 16 : 1024;  // 4 x the local queue
    constexpr std::size_t kShare = kWakeQueue, kAll = kGlobalRun + kShare, kLocal = 3;
    std::vector<std::unique_ptr<Notify>> notes, locals;
    for (std::size_t i = 0; i < kAll; ++i) notes.push_back(std::make_unique<Notify>());
    for (std::size_t i = 0; i < kLocal; ++i) locals.push_back(std::make_unique<Notify>());
    std::vector<std::size_t> order;
    order.reserve(kAll + kLocal);
    std::atomic<std::size_t> waiting{0};
    std::atomic<bool> held{false}, queued{false};
    std::thread feeder([&] {
        while (!held.load(std::memory_order_acquire)) std::this_thread::yield();
        for (std::size_t i = 0; i < kAll; ++i) notes[i]->notify_one();
        queued.store(true, std::memory_order_release);
    });
    Runtime rt(RuntimeConfig{.workers = 1});
    rt.block_on([&]() -> Task<void> {
        std::vector<JoinHandle<void>> tasks;
        for (std::size_t i = 0; i < kAll; ++i) {
            // kGlobalRun run from the global queue one by one; the share begins after them.
            if (i == kGlobalRun) tasks.push_back(eddy::spawn(waker(*notes[i], waiting, order, i, locals)));
            else tasks.push_back(eddy::spawn(one_shot(*notes[i], waiting, order, i)));
        }
        for (std::size_t i = 0; i < kLocal; ++i)
            tasks.push_back(eddy::spawn(one_shot(*locals[i], waiting, order, kAll + i)));
        while (waiting.load(std::memory_order_relaxed) < kAll + kLocal) co_await eddy::yield_now();
        hold(held, queued);
        for (auto& h : tasks) co_await std::move(h);
    }());
    feeder.join();
    REQUIRE(order.size() == kAll + kLocal);
    std::vector<std::size_t> at(kAll + kLocal);
    for (std::size_t i = 0; i < order.size(); ++i) at[order[i]] = i;
    const std::size_t moved_youngest = kGlobalRun + kShare / 2;  // the youngest of the moved half
    INFO("the moved half's youngest ran " << at[moved_youngest] << "th, the share's youngest " << at[kAll - 1]
                                          << "th, the first woken here " << at[kAll] << "th");
    CHECK(at[moved_youngest] < at[kAll - 1]);
    CHECK(at[moved_youngest] < at[kAll]);
}

/// Spins until `go` (bounded: a broken assumption fails the test instead of hanging it).
bool spin_until(const std::atomic<bool>& go) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!go.load(std::memory_order_acquire)) {
        if (std::chrono::steady_clock::now() > give_up) return false;
        std::this_thread::yield();
    }
    return true;
}

/// The two-worker case below: who ran when, and the gates between its steps.
struct StolenShare {
    static constexpr std::size_t kShare = 12, kS = kGlobalRun + kShare, kL = 4, kG = 8;
    // A task of the share: at most kGlobalRun run one by one before the pull (the block_on
    // task's own wake-up may be one of them).
    static constexpr std::size_t kFirst = kGlobalRun;
    std::vector<std::unique_ptr<Notify>> s, l;  // the share's (and the singles'), the local ones
    std::vector<std::unique_ptr<Notify>> g;     // the global ones that come after the share
    std::atomic<std::size_t> waiting{0};
    std::atomic<std::size_t> seq{0};
    std::vector<std::atomic<std::size_t>> at = std::vector<std::atomic<std::size_t>>(kS + kL + kG);
    std::atomic<std::size_t> holder_worker{99};
    std::atomic<bool> holder_runs{false}, release_holder{false}, main_holds{false}, s_queued{false};
    std::atomic<bool> stolen_ran{false}, g_go{false}, g_queued{false}, finished{false}, gave_up{false};
    std::atomic<std::size_t> last_done{0};

    StolenShare() {
        for (std::size_t i = 0; i < kS; ++i) s.push_back(std::make_unique<Notify>());
        for (std::size_t i = 0; i < kL; ++i) l.push_back(std::make_unique<Notify>());
        for (std::size_t i = 0; i < kG; ++i) g.push_back(std::make_unique<Notify>());
    }
    void note(std::size_t id) { at[id].store(seq.fetch_add(1) + 1); }
    void wait(const std::atomic<bool>& go) {
        if (!spin_until(go)) gave_up.store(true);
    }
    /// One of the last kL + kG tasks ran: the last one lets the other worker go on.
    void one_done() {
        if (last_done.fetch_add(1) + 1 == kL + kG) finished.store(true, std::memory_order_release);
    }
};

Task<void> share_task(StolenShare& t, std::size_t i) {
    t.waiting.fetch_add(1);
    co_await t.s[i]->notified();
    if (i == StolenShare::kFirst) {
        // Holds its worker (Y) until the other (X, let go now) has stolen part of the share,
        // then lets the feeder queue kG global wake-ups (younger than the share), and then
        // wakes kL tasks here (younger still: the last into the LIFO slot, the others into
        // the wake queue, behind the rest of the share).
        t.release_holder.store(true, std::memory_order_release);
        t.wait(t.stolen_ran);
        t.g_go.store(true, std::memory_order_release);
        t.wait(t.g_queued);
        for (auto& n : t.l) n->notify_one();
    } else if (i > StolenShare::kFirst && eddy::this_worker::index() == t.holder_worker.load()) {
        // Stolen: the first to run on X holds it until Y has run the rest.
        if (!t.stolen_ran.exchange(true)) t.wait(t.finished);
    }
    t.note(i);
}

Task<void> later_task(StolenShare& t, Notify& n, std::size_t id) {
    t.waiting.fetch_add(1);
    co_await n.notified();
    t.note(id);
    t.one_done();
}

/// Keeps X busy until a task of the share (kFirst) lets it go.
Task<void> holder(StolenShare& t) {
    t.holder_worker.store(eddy::this_worker::index().value_or(99));
    t.holder_runs.store(true, std::memory_order_release);
    t.wait(t.release_holder);
    co_return;
}

TEST_CASE("a share's turn ends with its last task, also when another worker stole part of it") {
    // Worker Y pulls a share of the global wake queue; worker X steals half of what is left
    // of it; then kG wake-ups arrive in the global queue, and a task of the share (on Y)
    // wakes kL tasks on Y. Y runs the rest of its part of the share, then the kG global
    // wake-ups, which are older than its own kL. Counting the share down with Y's own pops
    // kept Y off the global queue for as many more pops as X stole: the kL local ones ran
    // first.
    StolenShare t;
    std::jthread feeder([&] {  // joins even if the runtime throws
        t.wait(t.main_holds);
        for (auto& n : t.s) n->notify_one();
        t.s_queued.store(true, std::memory_order_release);
        t.wait(t.g_go);
        for (auto& n : t.g) n->notify_one();
        t.g_queued.store(true, std::memory_order_release);
    });
    Runtime rt(RuntimeConfig{.workers = 2});
    std::size_t main_worker = 99;
    std::uint64_t stolen_before = 0;
    rt.block_on([&]() -> Task<void> {
        std::vector<JoinHandle<void>> tasks;
        for (std::size_t i = 0; i < StolenShare::kS; ++i) tasks.push_back(eddy::spawn(share_task(t, i)));
        for (std::size_t i = 0; i < StolenShare::kL; ++i)
            tasks.push_back(eddy::spawn(later_task(t, *t.l[i], StolenShare::kS + i)));
        for (std::size_t i = 0; i < StolenShare::kG; ++i)
            tasks.push_back(eddy::spawn(later_task(t, *t.g[i], StolenShare::kS + StolenShare::kL + i)));
        tasks.push_back(eddy::spawn(holder(t)));
        // Woken through the reactor, so on whichever worker is free: Y, once X holds.
        while (t.waiting.load() < StolenShare::kS + StolenShare::kL + StolenShare::kG || !t.holder_runs.load())
            co_await eddy::sleep(std::chrono::milliseconds(1));
        main_worker = eddy::this_worker::index().value_or(99);
        if (main_worker < 2) stolen_before = rt.metrics().workers[1 - main_worker].tasks_stolen;
        // Y held while the feeder queues the share's tasks: then it runs up to kGlobalRun of
        // them one by one and pulls the rest into its wake queue.
        t.main_holds.store(true, std::memory_order_release);
        t.wait(t.s_queued);
        for (auto& h : tasks) co_await std::move(h);
    }());
    feeder.join();
    REQUIRE_FALSE(t.gave_up.load());
    REQUIRE(main_worker < 2);
    REQUIRE(main_worker != t.holder_worker.load());
    // X stole from Y's wake queue (half of the share's rest), not one by one from the global queue.
    CHECK(rt.metrics().workers[1 - main_worker].tasks_stolen - stolen_before >= 2);
    for (std::size_t id = 0; id < t.at.size(); ++id) REQUIRE(t.at[id].load() != 0);
    std::size_t last_global = 0, first_local = SIZE_MAX;
    for (std::size_t i = 0; i < StolenShare::kG; ++i)
        last_global = std::max(last_global, t.at[StolenShare::kS + StolenShare::kL + i].load());
    for (std::size_t i = 0; i + 1 < StolenShare::kL; ++i)  // the last one ran from the LIFO slot
        first_local = std::min(first_local, t.at[StolenShare::kS + i].load());
    INFO("the last global wake-up ran " << last_global << "th, the first local one in the wake queue " << first_local
                                        << "th");
    CHECK(last_global < first_local);
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
