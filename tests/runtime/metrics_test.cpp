// tests/runtime/metrics_test.cpp: Runtime::metrics(): the counts add up once the runtime is
// quiescent, steals show up when one worker spawns for others, parking is counted, the
// reactor's figures follow sleeps and I/O, and the rendering names every part.
#include <doctest/doctest.h>

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <eddy/eddy.hpp>

#include "support/waiting.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::RuntimeMetrics;
using eddy::Task;
using eddy::WorkerMetrics;
using eddy::test::kDeadline;
using eddy::test::past;
using namespace std::chrono_literals;

namespace {

Task<void> bump(std::atomic<int>& n) {
    n.fetch_add(1);
    co_return;
}

/// Polls rt.metrics() until `ok` holds or kDeadline passes.
template <class Pred>
RuntimeMetrics wait_for_metrics(const Runtime& rt, Pred ok) {
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    RuntimeMetrics m = rt.metrics();
    while (!ok(m) && !past(deadline)) {
        std::this_thread::sleep_for(1ms);
        m = rt.metrics();
    }
    return m;
}

}  // namespace

TEST_CASE("after quiescence every spawned task is completed and none is alive") {
    Runtime rt(RuntimeConfig{.workers = 2});
    std::atomic<int> ran{0};
    rt.block_on([](std::atomic<int>& n) -> Task<void> {
        std::vector<eddy::JoinHandle<void>> hs;
        for (int i = 0; i < 1000; ++i) hs.push_back(eddy::spawn(bump(n)));
        for (auto& h : hs) co_await std::move(h);
    }(ran));
    for (int i = 0; i < 100; ++i) rt.spawn(bump(ran)).detach();  // from outside: the injection path
    // The counters are relaxed (statistics): wait for the tasks' own effect too, which their
    // seq_cst increments publish, before checking it.
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (ran.load() < 1100 && !past(deadline)) std::this_thread::yield();
    const RuntimeMetrics m = wait_for_metrics(rt, [](const RuntimeMetrics& s) { return s.tasks_completed == 1101; });
    CHECK(ran.load() == 1100);
    CHECK(m.tasks_spawned == 1101);  // block_on's task, 1000 from a worker, 100 from this thread
    CHECK(m.tasks_completed == 1101);
    CHECK(m.tasks_alive == 0);
    CHECK(m.tasks_spawned == m.tasks_completed + m.tasks_alive);
    CHECK(m.total(&WorkerMetrics::tasks_spawned) == 1000);
    CHECK(m.total(&WorkerMetrics::tasks_completed) == 1101);
    CHECK(m.total(&WorkerMetrics::tasks_polled) >= 1101);
    CHECK(m.workers.size() == 2);
}

TEST_CASE("tasks alive counts spawned tasks that have not finished") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::Event release;
    for (int i = 0; i < 5; ++i) rt.spawn([](eddy::Event& e) -> Task<void> { co_await e; }(release)).detach();
    RuntimeMetrics m = wait_for_metrics(rt, [](const RuntimeMetrics& s) { return s.tasks_spawned == 5; });
    CHECK(m.tasks_alive == 5);
    rt.block_on([](eddy::Event& e) -> Task<void> {
        e.set();
        co_return;
    }(release));
    m = wait_for_metrics(rt, [](const RuntimeMetrics& s) { return s.tasks_alive == 0; });
    CHECK(m.tasks_alive == 0);
    CHECK(m.tasks_completed == 6);
}

TEST_CASE("steals appear when one worker spawns for many") {
    Runtime rt(RuntimeConfig{.workers = 2});
    constexpr int kTasks = 64;
    std::atomic<int> done{0};
    const bool others_ran = rt.block_on([](std::atomic<int>& n) -> Task<bool> {
        std::vector<eddy::JoinHandle<void>> hs;
        for (int i = 0; i < kTasks; ++i) hs.push_back(eddy::spawn(bump(n)));
        // This task does not suspend while it waits: only the other worker can run what it
        // spawned (all but the newest, which waits in this worker's LIFO slot).
        const auto deadline = std::chrono::steady_clock::now() + kDeadline;
        while (n.load() < kTasks - 1 && !past(deadline)) std::this_thread::yield();
        const bool ok = n.load() >= kTasks - 1;
        for (auto& h : hs) co_await std::move(h);
        co_return ok;
    }(done));
    REQUIRE(others_ran);
    const RuntimeMetrics m = rt.metrics();
    // The other worker got them by stealing, or from the global queue when the spawner's deque
    // overflowed (4-slot deques in the TSan build).
    CHECK(m.total(&WorkerMetrics::tasks_stolen) + m.total(&WorkerMetrics::global_queue_takes) >= kTasks - 1);
    CHECK((m.total(&WorkerMetrics::steals) > 0 || m.total(&WorkerMetrics::overflows) > 0));
    CHECK(m.total(&WorkerMetrics::steal_attempts) >= m.total(&WorkerMetrics::steals));
    CHECK(m.total(&WorkerMetrics::tasks_stolen) >= m.total(&WorkerMetrics::steals));
    CHECK(m.total(&WorkerMetrics::tasks_spawned) == kTasks);
}

TEST_CASE("idle workers park, and work from outside unparks one") {
    Runtime rt(RuntimeConfig{.workers = 2});
    RuntimeMetrics m =
        wait_for_metrics(rt, [](const RuntimeMetrics& s) { return s.workers[0].parks > 0 && s.workers[1].parks > 0; });
    CHECK(m.workers[0].parks > 0);
    CHECK(m.workers[1].parks > 0);
    std::atomic<int> n{0};
    rt.block_on(bump(n));
    m = rt.metrics();
    CHECK(m.total(&WorkerMetrics::unparks) > 0);
}

TEST_CASE("a worker's local queue depth shows tasks waiting in its deque") {
    Runtime rt(RuntimeConfig{.workers = 1});
    std::atomic<int> n{0};
    const std::size_t seen = rt.block_on([](const Runtime& r, std::atomic<int>& c) -> Task<std::size_t> {
        for (int i = 0; i < 10; ++i) eddy::spawn(bump(c)).detach();
        const RuntimeMetrics m = r.metrics();  // nothing ran yet: this task did not suspend
        co_return m.workers[0].local_queue_depth + m.global_queue_depth;
    }(rt, n));
    // Ten spawns: the newest waits in the LIFO slot, the nine others in the deque (or, with
    // 4-slot deques, partly in the global queue it overflowed into).
    CHECK(seen == 9);
}

TEST_CASE("the reactor's figures follow timers and I/O") {
    Runtime rt(RuntimeConfig{.workers = 2});
    rt.block_on([]() -> Task<void> {
        for (int i = 0; i < 10; ++i) co_await eddy::sleep(1ms);
    }());
    RuntimeMetrics m = rt.metrics();
    CHECK(m.reactor.timers_fired >= 10);
    // Sleeps are queued on the workers' timer queues, not handed to the reactor one by one.
    CHECK(m.reactor.operations == 0);

    // A pipe read that has to wait goes to the kernel: a submission and its completion.
    auto [rd, wr] = eddy::io::pipe();
    const auto before = rt.metrics().reactor;
    const std::size_t got = rt.block_on([](int r, int w) -> Task<std::size_t> {
        std::byte buf[8];
        auto [n, ignored] = co_await eddy::when_all(
            [](int fd, std::span<std::byte> b) -> Task<std::size_t> { co_return co_await eddy::io::read(fd, b); }(r,
                                                                                                                  buf),
            [](int fd) -> Task<std::size_t> {
                co_await eddy::sleep(5ms);
                const std::byte one[1] = {std::byte{1}};
                co_return co_await eddy::io::write(fd, one);
            }(w));
        (void)ignored;
        co_return n;
    }(rd.get(), wr.get()));
    CHECK(got == 1);
    m = rt.metrics();
    CHECK(m.reactor.submissions > before.submissions);
    CHECK(m.reactor.completions > before.completions);

    // A pending sleep is an armed timer until it is cancelled.
    std::stop_source stop;
    auto h = rt.spawn([](std::stop_token t) -> Task<void> {
        try {
            co_await eddy::sleep(1h, t);
        } catch (const eddy::OperationCancelled&) {
        }
    }(stop.get_token()));
    m = wait_for_metrics(rt, [](const RuntimeMetrics& s) { return s.reactor.timers_armed == 1; });
    CHECK(m.reactor.timers_armed == 1);
    stop.request_stop();
    REQUIRE(eddy::test::wait_finished(h));
    m = wait_for_metrics(rt, [](const RuntimeMetrics& s) { return s.reactor.timers_armed == 0; });
    CHECK(m.reactor.timers_armed == 0);
    m = wait_for_metrics(rt, [](const RuntimeMetrics& s) { return s.reactor.in_flight <= 1; });
    CHECK(m.reactor.in_flight <= 1);  // only the reactor's own eventfd read stays in flight
}

TEST_CASE("metrics can be read after shutdown, and to_string names every part") {
    Runtime rt(RuntimeConfig{.workers = 2});
    std::atomic<int> n{0};
    rt.block_on(bump(n));
    rt.shutdown();
    const RuntimeMetrics m = rt.metrics();
    CHECK(m.tasks_completed == 1);
    const std::string text = m.to_string();
    CHECK(text.find("runtime: workers=2 tasks_spawned=1 tasks_completed=1 tasks_alive=0") != std::string::npos);
    CHECK(text.find("\nscheduling_delay: count=") != std::string::npos);
    CHECK(text.find("worker 0: polled=") != std::string::npos);
    CHECK(text.find("worker 1: polled=") != std::string::npos);
    CHECK(text.find("reactor: operations=") != std::string::npos);
    CHECK(text.find(" budget_yields=") != std::string::npos);
    CHECK(text.find(" slow_polls=") != std::string::npos);
    CHECK(text.find("blocking: threads=0 idle=0 queued=0 calls=0 left_running=0") != std::string::npos);
}

namespace {

/// Spins without suspending until `woken` is set by another thread, then `extra` longer: the
/// only worker is busy all that time.
Task<void> spin_past(const std::atomic<bool>& woken, std::chrono::milliseconds extra) {
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (!woken.load())
        if (past(deadline)) co_return;
    const auto until = std::chrono::steady_clock::now() + extra;
    while (std::chrono::steady_clock::now() < until) {
    }
}

}  // namespace

TEST_SUITE("runtime/metrics") {

TEST_CASE("the scheduling delay counts how long a woken task waited for its worker") {
    // One worker, busy spinning; a plain thread wakes a waiting task (through the global
    // queue) and the spin goes on 30 ms more: the woken task waited at least that long. Only
    // a lower bound is checked: a loaded machine makes the wait longer, never shorter.
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::Notify notify;
    std::atomic<bool> woken{false};
    eddy::JoinHandle<void> waiter = rt.spawn([](eddy::Notify& n) -> Task<void> { co_await n.notified(); }(notify));
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (notify.waiters() == 0 && !past(deadline)) std::this_thread::yield();
    REQUIRE(notify.waiters() == 1);
    eddy::JoinHandle<void> spinner = rt.spawn(spin_past(woken, 30ms));
    std::this_thread::sleep_for(5ms);  // the spinner is running (if not, the wait is only shorter)
    notify.notify_one();
    woken.store(true);
    rt.block_on([](eddy::JoinHandle<void> a, eddy::JoinHandle<void> b) -> Task<void> {
        co_await std::move(a);
        co_await std::move(b);
    }(std::move(waiter), std::move(spinner)));
    const eddy::DurationHistogram delay = rt.metrics().scheduling_delay();
    INFO("count " << delay.count() << ", max " << delay.max().count() << " ns");
    CHECK(delay.count() >= 1);
    CHECK(delay.max() >= 25ms);
    CHECK(delay.percentile(1.0) == delay.max());
    CHECK(rt.metrics().workers[0].scheduling_delay.count() == delay.count());
}

TEST_CASE(
    "an Event set from a plain thread during a long poll counts its waiter's wait; a task not yet waiting has none") {
    // The waiter is suspended on the event before the spinner starts: set() wakes it through
    // the global queue and its wait is counted. A task spawned during the spin has not waited
    // when set() runs: it finds the event set on its first poll, nothing woke it, and its time
    // in the queue is a spawned task's, which the histogram does not time (so a count that
    // does not move there is not a lost wake-up).
    for (const bool waiting_first : {true, false}) {
        CAPTURE(waiting_first);
        Runtime rt(RuntimeConfig{.workers = 1});
        eddy::Event event;
        std::atomic<bool> suspended{false}, woken{false};
        auto wait_on = [](eddy::Event& e) -> Task<void> { co_await e; };
        std::optional<eddy::JoinHandle<void>> waiter;
        if (waiting_first) {
            waiter.emplace(rt.spawn(wait_on(event)));
            // Spawned after it onto the one worker, so it runs once the waiter has suspended.
            rt.spawn([](std::atomic<bool>& s) -> Task<void> {
                  s.store(true);
                  co_return;
              }(suspended))
                .detach();
            const auto deadline = std::chrono::steady_clock::now() + kDeadline;
            while (!suspended.load() && !past(deadline)) std::this_thread::yield();
            REQUIRE(suspended.load());
        }
        const std::uint64_t before = rt.metrics().scheduling_delay().count();
        eddy::JoinHandle<void> spinner = rt.spawn(spin_past(woken, 30ms));
        if (!waiting_first) waiter.emplace(rt.spawn(wait_on(event)));
        std::this_thread::sleep_for(5ms);
        event.set();
        woken.store(true);
        rt.block_on([](eddy::JoinHandle<void> a, eddy::JoinHandle<void> b) -> Task<void> {
            co_await std::move(a);
            co_await std::move(b);
        }(std::move(*waiter), std::move(spinner)));
        const eddy::DurationHistogram delay = rt.metrics().scheduling_delay();
        if (waiting_first) {
            CHECK(delay.count() == before + 1);
            CHECK(delay.max() >= 25ms);
        } else {
            CHECK(delay.count() == before);
        }
    }
}

TEST_CASE("a timer's scheduling delay counts from its deadline, however late the reactor fired it") {
    // The reactor thread's start hook holds it 100 ms before its loop, so a 5 ms sleep's timer
    // fires about 95 ms late, and the task is queued only then. Stamped when the reactor got
    // to it, its wait would be next to nothing; counted from the deadline it is about 95 ms.
    // Only a lower bound is checked (the hook's sleep can only last longer).
    Runtime rt(RuntimeConfig{.workers = 1, .on_thread_start = [] {
                                 char name[16] = {};
                                 pthread_getname_np(pthread_self(), name, sizeof name);
                                 if (std::string(name).find("reactor") != std::string::npos)
                                     std::this_thread::sleep_for(100ms);
                             }});
    rt.block_on([]() -> Task<void> { co_await eddy::sleep(5ms); }());
    const eddy::DurationHistogram delay = rt.metrics().scheduling_delay();
    INFO("count " << delay.count() << ", max " << delay.max().count() << " ns");
    CHECK(delay.count() >= 1);
    CHECK(delay.max() >= 50ms);
}

}  // TEST_SUITE("runtime/metrics")
