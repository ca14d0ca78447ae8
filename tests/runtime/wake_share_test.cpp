// tests/runtime/wake_share_test.cpp: the global wake queue's order (runtime/worker.hpp,
// "Input first"): wake-ups from outside a worker run in the order they came, also those a
// worker pulled into its own wake queue as a share, and the share's turn ends as soon as its
// last task left, whoever took it. The cases around a worker's own wake-ups are in
// wake_order_test.cpp.
//
// Gates held by the test's tasks fix the order of every step, and the cases check the order
// in which the tasks ran, never how long anything took: the same on a loaded machine.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/this_worker.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/sync/notify.hpp>
#include <eddy/tasks/task.hpp>
#include <eddy/time/sleep.hpp>

using eddy::JoinHandle;
using eddy::Notify;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;

namespace {

/// Tasks of the global wake queue a worker runs in a row before one of its own
/// (kMaxGlobalRun in runtime/worker.hpp).
constexpr std::uint64_t kGlobalRun = 16;
/// The build's local queues (-Dsmall_queues: 4 and 16 slots, so that overflow runs in every
/// test).
#ifdef EDDY_LOCAL_QUEUE_CAPACITY
constexpr bool kSmallQueues = true;
#else
constexpr bool kSmallQueues = false;
#endif

}  // namespace

TEST_SUITE("runtime/wake_share") {
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

}  // TEST_SUITE("runtime/wake_share")
