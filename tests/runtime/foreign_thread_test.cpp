// tests/runtime/foreign_thread_test.cpp: plain threads hand values to tasks that wait for
// them (oneshot::Sender::send, Channel::try_send and close from any thread), and run tasks on
// a runtime from outside and wait for them (Runtime::spawn, JoinHandle). The pattern of
// examples/foreign_events.cpp; run under TSan with the rest of the suite.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <eddy/sync/channel.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/sync/oneshot.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/tasks/task.hpp>

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using namespace std::chrono_literals;

namespace {

Task<int> receive(eddy::oneshot::Receiver<int> rx, std::atomic<int>& waiting) {
    waiting.fetch_add(1);
    co_return co_await rx;
}

Task<std::uint64_t> drain(eddy::Channel<std::uint64_t>& ch) {
    std::uint64_t sum = 0;
    while (std::optional<std::uint64_t> v = co_await ch.receive()) sum += *v;
    co_return sum;
}

}  // namespace

TEST_CASE("a plain thread's oneshot sends wake tasks that are already waiting") {
    Runtime rt(RuntimeConfig{.workers = 2});
    constexpr int kTasks = 200;
    std::vector<eddy::oneshot::Sender<int>> senders;
    std::vector<eddy::JoinHandle<int>> handles;
    std::atomic<int> waiting{0};
    for (int i = 0; i < kTasks; ++i) {
        auto [tx, rx] = eddy::oneshot::channel<int>();
        senders.push_back(std::move(tx));
        handles.push_back(rt.spawn(receive(std::move(rx), waiting)));  // Runtime::spawn: any thread
    }
    while (waiting.load() < kTasks) std::this_thread::sleep_for(1ms);  // most are suspended by now
    std::thread sender([&senders] {
        for (int i = 0; i < kTasks; ++i) senders[static_cast<std::size_t>(i)].send(i * 3);
    });
    sender.join();
    long sum = 0;
    for (auto& h : handles)
        sum += rt.block_on(
            [](eddy::JoinHandle<int> handle) -> Task<int> { co_return co_await std::move(handle); }(std::move(h)));
    CHECK(sum == 3L * kTasks * (kTasks - 1) / 2);
}

TEST_CASE("plain threads feed a Channel with try_send while tasks wait on it; close() from a thread ends them") {
    Runtime rt(RuntimeConfig{.workers = 2});
    eddy::Channel<std::uint64_t> ch(8);  // small: receivers often wait, producers often find it full
    constexpr std::uint64_t kPerThread = 20'000;
    auto consumers = rt.spawn(eddy::when_all(drain(ch), drain(ch), drain(ch)));
    std::vector<std::thread> producers;
    for (std::uint64_t t = 0; t < 3; ++t) {
        producers.emplace_back([&ch, t] {
            for (std::uint64_t i = 0; i < kPerThread; ++i) {
                std::uint64_t v = t * kPerThread + i + 1;
                while (!ch.try_send(std::move(v))) std::this_thread::yield();
            }
        });
    }
    for (auto& p : producers) p.join();
    ch.close();  // any thread: the receivers drain what is left, then get std::nullopt
    auto [a, b, c] = rt.block_on([](auto h) -> Task<std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>> {
        co_return co_await std::move(h);
    }(std::move(consumers)));
    const std::uint64_t n = 3 * kPerThread;
    CHECK(a + b + c == n * (n + 1) / 2);  // every value received exactly once
}
