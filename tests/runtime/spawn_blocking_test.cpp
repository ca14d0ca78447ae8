// tests/runtime/spawn_blocking_test.cpp: eddy::spawn_blocking and Runtime::spawn_blocking
// (eddy/runtime/spawn_blocking.hpp, runtime/blocking_pool.hpp): results, exceptions, the
// thread limit and the queue, idle threads leaving, workers left free, shutdown with calls
// queued, running, and running too long, the metrics and the settings.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <latch>
#include <pthread.h>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <eddy/time/sleep.hpp>
#include <eddy/runtime/config.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/metrics.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/spawn_blocking.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/scoped_env.hpp"
#include "support/stderr_capture.hpp"

using eddy::JoinHandle;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

template <class T>
Task<T> join(JoinHandle<T> h) {
    co_return co_await std::move(h);
}

/// Polls `pred` for up to 10 s.
template <class P>
bool eventually(P pred) {
    const auto end = Clock::now() + 10s;
    while (!pred()) {
        if (Clock::now() > end) return false;
        std::this_thread::sleep_for(1ms);
    }
    return true;
}

}  // namespace

TEST_CASE("a value, void and a move-only result come back through the handle") {
    Runtime rt(RuntimeConfig{.workers = 2});
    const auto [n, text, ptr] = rt.block_on([]() -> Task<std::tuple<int, std::string, int>> {
        std::atomic<bool> ran{false};
        JoinHandle<int> a = eddy::spawn_blocking([] { return 6 * 7; });
        JoinHandle<void> b = eddy::spawn_blocking([&ran] { ran.store(true); });
        JoinHandle<std::unique_ptr<int>> c = eddy::spawn_blocking([] { return std::make_unique<int>(5); });
        const int x = co_await std::move(a);
        co_await std::move(b);
        std::unique_ptr<int> p = co_await std::move(c);
        co_return std::tuple{x, ran.load() ? std::string("ran") : std::string("not run"), *p};
    }());
    CHECK(n == 42);
    CHECK(text == "ran");
    CHECK(ptr == 5);
    CHECK(rt.metrics().blocking_calls == 3);
}

TEST_CASE("the call's exception reaches the awaiter") {
    Runtime rt(RuntimeConfig{.workers = 1});
    CHECK_THROWS_WITH_AS(
        rt.block_on(join(rt.spawn_blocking([]() -> int { throw std::runtime_error("disk on fire"); }))), "disk on fire",
        std::runtime_error);
}

TEST_CASE("more calls than threads: never more than the limit at once, the rest queued, all run") {
    RuntimeConfig config{.workers = 2};
    config.max_blocking_threads = 2;
    Runtime rt(config);
    std::atomic<int> running{0}, most{0};
    std::atomic<bool> release{false};
    std::vector<JoinHandle<int>> handles;
    for (int i = 0; i < 20; ++i) {
        handles.push_back(rt.spawn_blocking([&, i] {
            const int now = running.fetch_add(1) + 1;
            for (int m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
            }
            while (!release.load()) std::this_thread::sleep_for(100us);
            running.fetch_sub(1);
            return i;
        }));
    }
    REQUIRE(eventually([&] { return running.load() == 2; }));
    const eddy::RuntimeMetrics m = rt.metrics();
    CHECK(m.blocking_threads == 2);
    CHECK(m.blocking_queued == 18);
    CHECK(m.blocking_idle == 0);
    release.store(true);
    int sum = 0;
    for (auto& h : handles) sum += rt.block_on(join(std::move(h)));
    CHECK(sum == 19 * 20 / 2);
    CHECK(most.load() == 2);
    CHECK(rt.metrics().blocking_calls == 20);
}

TEST_CASE("idle blocking threads exit after the keep-alive; a later call starts one again") {
    RuntimeConfig config{.workers = 1};
    config.blocking_keep_alive = 30ms;
    Runtime rt(config);
    CHECK(rt.block_on(join(rt.spawn_blocking([] { return 1; }))) == 1);
    CHECK(eventually([&] { return rt.metrics().blocking_threads == 0; }));
    CHECK(rt.block_on(join(rt.spawn_blocking([] { return 2; }))) == 2);
}

TEST_CASE("a blocking call leaves the worker free: a sleep on the only worker completes meanwhile") {
    Runtime rt(RuntimeConfig{.workers = 1});
    const bool ok = rt.block_on([]() -> Task<bool> {
        std::atomic<bool> done_sleeping{false};
        JoinHandle<bool> call = eddy::spawn_blocking([&done_sleeping] {
            // Blocks its thread until the task on the only worker has slept.
            const auto end = Clock::now() + 10s;
            while (!done_sleeping.load() && Clock::now() < end) std::this_thread::sleep_for(1ms);
            return done_sleeping.load();
        });
        co_await eddy::sleep(20ms);
        done_sleeping.store(true);
        co_return co_await std::move(call);
    }());
    CHECK(ok);
}

TEST_CASE("shutdown waits for a running call that ends within the timeout, and drops queued ones") {
    RuntimeConfig config{.workers = 1};
    config.max_blocking_threads = 1;
    auto finished = std::make_shared<std::atomic<bool>>(false);
    auto started = std::make_shared<std::latch>(1);
    JoinHandle<int> queued;
    {
        Runtime rt(config);
        (void)rt.spawn_blocking([finished, started] {
            started->count_down();
            std::this_thread::sleep_for(100ms);
            finished->store(true);
        });
        queued = rt.spawn_blocking([] { return 1; });  // waits behind the first: never runs
        started->wait();
    }  // shutdown
    CHECK(finished->load());
    CHECK(queued.is_finished());
    Runtime other(RuntimeConfig{.workers = 1});
    CHECK_THROWS_AS(other.block_on(join(std::move(queued))), eddy::RuntimeStopped);
}

TEST_CASE("shutdown stops waiting for a call that runs too long, says so, and the call ends on its own") {
    RuntimeConfig config{.workers = 1};
    config.blocking_shutdown_timeout = 50ms;
    auto release = std::make_shared<std::atomic<bool>>(false);
    auto ended = std::make_shared<std::atomic<bool>>(false);
    auto started = std::make_shared<std::latch>(1);
    eddy::test::StderrCapture capture;
    std::uint64_t left = 0;
    Clock::duration took{};
    {
        Runtime rt(config);
        (void)rt.spawn_blocking([release, ended, started] {
            started->count_down();
            while (!release->load()) std::this_thread::sleep_for(1ms);
            ended->store(true);
        });
        started->wait();
        const auto start = Clock::now();
        rt.shutdown();
        took = Clock::now() - start;
        left = rt.metrics().blocking_left_running;
        CHECK_THROWS_AS((void)rt.spawn_blocking([] { return 0; }), eddy::RuntimeStopped);
    }  // the Runtime is gone; the call still runs on its thread
    const std::string err = capture.finish();
    CHECK(left == 1);
    CHECK(took >= 50ms);
    CHECK(took < 5s);
    CHECK(err.find("eddy: shutdown left 1 blocking call(s) running (blocking_shutdown_timeout 50 ms)") !=
          std::string::npos);
    CHECK_FALSE(ended->load());
    release->store(true);
    CHECK(eventually([&] { return ended->load(); }));
    std::this_thread::sleep_for(20ms);  // let the thread free the job and exit (LeakSanitizer)
}

TEST_CASE("misuse: eddy::spawn_blocking off a worker throws WrongThread") {
    CHECK_THROWS_AS((void)eddy::spawn_blocking([] { return 1; }), eddy::WrongThread);
}

TEST_CASE("the blocking settings are validated, as fields and as EDDY_* variables") {
    auto rejects = [](auto set, const char* field) {
        RuntimeConfig c{.workers = 1};
        set(c);
        CHECK_THROWS_WITH_AS(Runtime{c}, doctest::Contains(field), std::invalid_argument);
    };
    rejects([](RuntimeConfig& c) { c.max_blocking_threads = 0; }, "max_blocking_threads");
    rejects([](RuntimeConfig& c) { c.max_blocking_threads = RuntimeConfig::kMaxBlockingThreads + 1; },
            "max_blocking_threads");
    rejects([](RuntimeConfig& c) { c.blocking_keep_alive = 0ms; }, "blocking_keep_alive");
    rejects([](RuntimeConfig& c) { c.blocking_shutdown_timeout = -1ms; }, "blocking_shutdown_timeout");
    {
        eddy::test::ScopedEnv a("EDDY_MAX_BLOCKING_THREADS", "8");
        eddy::test::ScopedEnv b("EDDY_BLOCKING_KEEP_ALIVE_MS", "250");
        eddy::test::ScopedEnv c("EDDY_BLOCKING_SHUTDOWN_TIMEOUT_MS", "0");
        const RuntimeConfig cfg = RuntimeConfig::from_env();
        CHECK(cfg.max_blocking_threads == 8);
        CHECK(cfg.blocking_keep_alive == 250ms);
        CHECK(cfg.blocking_shutdown_timeout == 0ms);
    }
    for (const char* var :
         {"EDDY_MAX_BLOCKING_THREADS", "EDDY_BLOCKING_KEEP_ALIVE_MS", "EDDY_BLOCKING_SHUTDOWN_TIMEOUT_MS"}) {
        for (const char* bad : {"", "x", "-1", "99999999999"}) {
            eddy::test::ScopedEnv env(var, bad);
            CHECK_THROWS_WITH_AS((void)RuntimeConfig::from_env(), doctest::Contains(var), std::invalid_argument);
        }
    }
    eddy::test::ScopedEnv zero("EDDY_MAX_BLOCKING_THREADS", "0");
    CHECK_THROWS_WITH_AS((void)RuntimeConfig::from_env(), doctest::Contains("EDDY_MAX_BLOCKING_THREADS"),
                         std::invalid_argument);
}

TEST_CASE("blocking threads run the thread hooks and carry the runtime's name") {
    std::atomic<int> starts{0}, stops{0};
    RuntimeConfig config{.workers = 1, .thread_name_prefix = "svc"};
    config.on_thread_start = [&starts] { starts.fetch_add(1); };
    config.on_thread_stop = [&stops] { stops.fetch_add(1); };
    std::string name;
    {
        Runtime rt(config);
        name = rt.block_on(join(rt.spawn_blocking([] {
            char buf[16] = {};
            pthread_getname_np(pthread_self(), buf, sizeof buf);
            return std::string(buf);
        })));
    }
    CHECK(name == "svc-blocking");
    // The worker, the reactor and the blocking thread (it exits at shutdown).
    CHECK(eventually([&] { return stops.load() == 3; }));
    CHECK(starts.load() == 3);
}
