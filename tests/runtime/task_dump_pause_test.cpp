// TaskDump::paused (how long a dump stopped the workers) and dumps taken while tasks keep
// waking and finishing: the records are captured while the workers are paused and turned
// into the tree after they go on (runtime/task_dump.cpp), so nothing of a frame may be read
// then; the sanitizer builds check that. With and without the records (-Dtask_dump).
#include <doctest/doctest.h>

#include <eddy/eddy.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using eddy::Runtime;
using eddy::Task;
using eddy::TaskDump;

namespace {

/// Every node of `t` in walk order.
void nodes(const TaskDump::Task& t, const std::function<void(const TaskDump::Task&)>& f) {
    f(t);
    for (const TaskDump::Task& c : t.children) nodes(c, f);
}

Task<void> wait_on(eddy::Event& e) { co_await e; }

}  // namespace

TEST_CASE("paused: filled, within the dump's own time; a dump from a task too") {
    Runtime rt(eddy::RuntimeConfig{.workers = 2});
    eddy::Event go;
    std::vector<eddy::JoinHandle<void>> hs;
    for (int i = 0; i < 100; ++i) hs.push_back(rt.spawn(wait_on(go), "waiter"));
    const auto t0 = std::chrono::steady_clock::now();
    const TaskDump d = rt.dump();
    const auto wall = std::chrono::steady_clock::now() - t0;
    CHECK(d.complete);
    CHECK(d.tasks == 100);
    CHECK(d.paused > 0ns);
    CHECK(d.paused <= wall);
    const TaskDump from_task = rt.block_on([]() -> Task<TaskDump> { co_return co_await eddy::dump_tasks(); }());
    CHECK(from_task.paused > 0ns);
    CHECK(from_task.tasks == 101);  // the waiters and the dumping block_on task
    go.set();
    rt.block_on([](std::vector<eddy::JoinHandle<void>>& v) -> Task<void> {
        for (auto& h : v) co_await std::move(h);
    }(hs));
}

TEST_CASE("paused: a partial dump counts until it gave up on the busy worker") {
    Runtime rt(eddy::RuntimeConfig{.workers = 1});
    std::atomic<bool> spinning{false}, release{false};
    auto h = rt.spawn([](std::atomic<bool>& s, std::atomic<bool>& r) -> Task<void> {
        s.store(true);
        while (!r.load()) std::this_thread::yield();  // one long poll: the worker cannot stop
        co_return;
    }(spinning, release));
    while (!spinning.load()) std::this_thread::yield();
    const TaskDump d = rt.dump(20ms);
    release.store(true);
    CHECK_FALSE(d.complete);
    CHECK(d.paused >= 20ms);
    rt.block_on([](eddy::JoinHandle<void> j) -> Task<void> { co_await std::move(j); }(std::move(h)));
}

namespace {

/// Two tasks passing a ball: each round the pinger spawns a task that waits on a fresh
/// Event, the ponger sets that Event, and the pinger joins the task (which so finishes).
struct Pair {
    eddy::Notify to_ping, to_pong;
    eddy::Event* ball = nullptr;  // handed over through the Notify (its lock orders it)
    bool done = false;
    std::uint64_t rounds = 0;
};

Task<void> ping(Pair& p, const std::atomic<bool>& stop) {
    while (!stop.load(std::memory_order_relaxed)) {
        eddy::Event e;
        auto round = eddy::spawn(wait_on(e), "round");
        p.ball = &e;
        p.to_pong.notify_one();
        co_await p.to_ping.notified();
        co_await std::move(round);
        ++p.rounds;
    }
    p.done = true;
    p.to_pong.notify_one();
}

Task<void> pong(Pair& p) {
    for (;;) {
        co_await p.to_pong.notified();
        if (p.done) co_return;
        p.ball->set();
        p.to_ping.notify_one();
    }
}

}  // namespace

TEST_CASE("50 dumps from a thread while 300 tasks ping-pong on Notifies and Events, spawn and finish: each whole") {
    constexpr std::size_t kPairs = 150;
    Runtime rt(eddy::RuntimeConfig{.workers = 2});
    std::vector<Pair> pairs(kPairs);
    std::atomic<bool> stop{false};
    std::vector<eddy::JoinHandle<void>> hs;
    for (Pair& p : pairs) {
        hs.push_back(rt.spawn(pong(p), "pong"));
        hs.push_back(rt.spawn(ping(p, stop), "ping"));
    }
    const std::set<std::string> states{"suspended", "runnable", "not started", "finished"};
    int bad_ids = 0, bad_states = 0, bad_kinds = 0, partial = 0, unpaused = 0;
    std::size_t most = 0;
    for (int i = 0; i < 50; ++i) {
        const TaskDump d = rt.dump();
        if (!d.complete) ++partial;
        if (d.paused <= 0ns) ++unpaused;
        std::set<std::uint64_t> ids;
        std::size_t pings = 0;
        for (const TaskDump::Task& r : d.roots) {
            if (r.kind != "spawned") ++bad_kinds;
            if (r.name == "ping") ++pings;
            nodes(r, [&](const TaskDump::Task& t) {
                if (t.id == 0 || t.id > d.tasks || !ids.insert(t.id).second) ++bad_ids;
                if (states.count(t.state) == 0) ++bad_states;
#if EDDY_TASK_DUMP
                // A ping joins its round: a root of this dump, or one that finished.
                if (t.waits_on.find("another runtime") != std::string::npos) ++bad_states;
#endif
            });
        }
        if (ids.size() != d.tasks) ++bad_ids;
        CHECK(pings == kPairs);  // no ping finishes before the stop
        most = std::max(most, d.tasks);
        (void)d.to_text();
        (void)d.to_json();
    }
    stop.store(true);
    std::uint64_t rounds = 0;
    rt.block_on([](std::vector<eddy::JoinHandle<void>>& v) -> Task<void> {
        for (auto& h : v) co_await std::move(h);
    }(hs));
    for (const Pair& p : pairs) rounds += p.rounds;
    CHECK(partial == 0);
    CHECK(unpaused == 0);
    CHECK(bad_ids == 0);
    CHECK(bad_states == 0);
    CHECK(bad_kinds == 0);
    CHECK(most >= 2 * kPairs);
    CHECK(rounds > 0);
}

TEST_CASE("a thread dumping in a loop while the runtime shuts down its named waiting tasks") {
    // Named tasks keep their names in a FrameExtra, which shutdown frees with the frame: a
    // dump must have copied each name under its pause, and the loop must end with
    // RuntimeStopped, not a crash or a hang (ASan and TSan check the rest).
    const std::string prefix = "a task name too long for the small-string buffer, number ";
    for (int round = 0; round < 8; ++round) {
        Runtime rt(eddy::RuntimeConfig{.workers = 2});
        eddy::Event ev;
        for (int i = 0; i < 300; ++i) rt.spawn(wait_on(ev), prefix + std::to_string(i)).detach();
        std::atomic<int> dumps{0}, stopped{0}, bad_names{0};
        std::thread dumper([&] {
            for (;;) {
                try {
                    const TaskDump d = rt.dump();
                    for (const auto& r : d.roots)
                        if (!r.name.empty() && r.name.rfind(prefix, 0) != 0) bad_names.fetch_add(1);
                    dumps.fetch_add(1);
                } catch (const eddy::RuntimeStopped&) {
                    stopped.fetch_add(1);
                    return;
                }
            }
        });
        while (dumps.load() < 1 + round % 3) std::this_thread::yield();
        if (round % 2 == 0)
            rt.block_on([](eddy::Event& e) -> Task<void> {  // half the rounds finish them first
                e.set();
                co_return;
            }(ev));
        rt.shutdown();
        dumper.join();
        CHECK(bad_names.load() == 0);
        CHECK(stopped.load() == 1);
        CHECK(dumps.load() >= 1 + round % 3);
    }
}
