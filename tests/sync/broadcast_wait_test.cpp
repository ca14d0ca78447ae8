// tests/sync/broadcast_wait_test.cpp: eddy::broadcast receivers that wait: a send wakes every
// waiting receiver (also from a plain thread, across two workers), the senders' end (drain,
// then nullopt; waiting receivers), cancellation without loss, races of stops and sends,
// multi-worker senders and receivers with exact accounting, a slow receiver's lags, runtime
// shutdown while receivers wait, and misuse.
//
// Tests that need "these tasks are waiting now" use one worker and eddy::test::settle(),
// where that is exact.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <eddy/sync/broadcast.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/counted.hpp"
#include "support/off_worker.hpp"
#include "support/sync_helpers.hpp"
#include "support/waiting.hpp"
#include "support/broadcast.hpp"

using namespace eddy::test::broadcast_tests;

TEST_SUITE("sync/broadcast") {

TEST_CASE("a send wakes every waiting receiver, and each gets the value") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto [tx, rx] = eddy::broadcast::channel<int>(4);
    std::vector<Receiver<int>> receivers;
    for (int i = 0; i < 5; ++i) receivers.push_back(tx.subscribe());
    const int sum = rt.block_on([](Sender<int>& sender, std::vector<Receiver<int>>& subscribers) -> Task<int> {
        std::vector<JoinHandle<std::optional<int>>> waiting;
        for (auto& r : subscribers) waiting.push_back(eddy::spawn(receive_one(r)));
        co_await settle();
        int total = 0;
        for (auto& h : waiting) total += h.is_finished() ? 1000 : 0;  // none may finish yet
        sender.send(7);
        for (auto& h : waiting) total += *co_await std::move(h);
        co_return total;
    }(tx, receivers));
    CHECK(sum == 5 * 7);
    CHECK(rx.try_receive() == 7);
}

TEST_CASE("a sender from a plain thread wakes receivers waiting on two workers") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto [tx, rx] = eddy::broadcast::channel<std::int64_t>(1024);
    constexpr std::int64_t kValues = 1000;
    std::vector<JoinHandle<Log>> receivers;
    for (int i = 0; i < 3; ++i) receivers.push_back(rt.spawn(drain(tx.subscribe())));
    receivers.push_back(rt.spawn(drain(std::move(rx))));
    std::thread sender([s = std::move(tx)]() mutable {
        for (std::int64_t i = 0; i < kValues; ++i) s.send(i);
    });  // the thread's sender goes with it: the end of the stream
    sender.join();
    for (auto& h : receivers) {
        const Log log = rt.block_on(
            [](JoinHandle<Log> handle) -> Task<Log> { co_return co_await std::move(handle); }(std::move(h)));
        CHECK(log.lags.empty());  // the ring holds everything
        REQUIRE(log.values.size() == static_cast<std::size_t>(kValues));
        int wrong = 0;
        for (std::int64_t i = 0; i < kValues; ++i) wrong += log.values[static_cast<std::size_t>(i)] == i ? 0 : 1;
        CHECK(wrong == 0);
    }
}

TEST_CASE("once every sender is gone receivers drain, then get nullopt; waiting ones get nullopt at once") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto [tx, rx] = eddy::broadcast::channel<int>(3);
    struct Result {
        std::optional<int> first;
        std::vector<std::optional<int>> kept_up;
        std::optional<int> last;
        bool closed = false;
        std::vector<std::string> drained;
    };
    Receiver<int> waiter = tx.subscribe();
    const Result r =
        rt.block_on([](Sender<int> sender, Receiver<int>& receiver, Receiver<int>& subscriber) -> Task<Result> {
            Result result;
            Sender<int> copy = sender;  // senders are copies: each keeps the channel open
            JoinHandle<std::optional<int>> first = eddy::spawn(receive_one(subscriber));
            co_await settle();
            { Sender<int> dropped = std::move(sender); }  // not the last: `first` waits on
            co_await settle();
            copy.send(1);  // `first` gets it
            result.first = co_await std::move(first);
            copy.send(2);
            copy.send(3);
            copy.send(4);  // the ring keeps 2..4: receiver (still at 1) lags by one value; subscriber, at 2, does not
            for (int i = 0; i < 3; ++i) result.kept_up.push_back(co_await receive_one(subscriber));
            JoinHandle<std::optional<int>> last = eddy::spawn(receive_one(subscriber));
            co_await settle();
            { Sender<int> dropped = std::move(copy); }  // the last sender: the end
            result.last = co_await std::move(last);
            result.closed = receiver.is_closed();
            result.drained = try_drain(receiver);
            co_return result;
        }(std::move(tx), rx, waiter));
    CHECK(r.first == 1);
    CHECK(r.kept_up == std::vector<std::optional<int>>{2, 3, 4});
    CHECK(r.last == std::nullopt);
    CHECK(r.closed);
    CHECK(r.drained == std::vector<std::string>{"L1", "2", "3", "4"});  // lag, drain, then nullopt
    CHECK(waiter.try_receive() == std::nullopt);
    CHECK(rt.block_on(receive_one(rx)) == std::nullopt);
}

TEST_CASE("a cancelled receive consumes nothing: the next receive gets the value") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto [tx, rx] = eddy::broadcast::channel<int>(4);
    struct Result {
        std::string cancelled;
        std::optional<int> next;
    };
    const Result r = rt.block_on([](Sender<int>& sender, Receiver<int>& receiver) -> Task<Result> {
        std::stop_source stop;
        JoinHandle<std::optional<int>> waiting =
            eddy::spawn(eddy::with_stop_token(receive_one(receiver), stop.get_token()));
        co_await settle();
        stop.request_stop();
        Result result;
        result.cancelled = co_await outcome(std::move(waiting));
        sender.send(5);
        result.next = co_await receiver.receive();
        co_return result;
    }(tx, rx));
    CHECK(r.cancelled == "cancelled");
    CHECK(r.next == 5);
}

TEST_CASE("a receive under a stopped token throws at once and consumes nothing, not even a lag") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto [tx, rx] = eddy::broadcast::channel<int>(1);
    tx.send(1);
    tx.send(2);
    std::stop_source stop;
    stop.request_stop();
    const std::string how = rt.block_on([](Receiver<int>& receiver, std::stop_token t) -> Task<std::string> {
        co_return co_await outcome(eddy::spawn(eddy::with_stop_token(receive_one(receiver), t)));
    }(rx, stop.get_token()));
    CHECK(how == "cancelled");
    CHECK(try_drain(rx) == std::vector<std::string>{"L1", "2"});
}

TEST_CASE("a receive whose stop races a send on two workers either gets the value or leaves it") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto [tx, rx] = eddy::broadcast::channel<int>(4);
    constexpr int kRounds = 300;
    const int lost = rt.block_on([](Sender<int>& sender, Receiver<int>& receiver) -> Task<int> {
        int misses = 0;
        for (int i = 0; i < kRounds; ++i) {
            std::stop_source stop;
            JoinHandle<std::optional<int>> waiter =
                eddy::spawn(eddy::with_stop_token(receive_one(receiver), stop.get_token()));
            JoinHandle<void> send_task = eddy::spawn([](Sender<int>& producer, int v) -> Task<void> {
                producer.send(v);
                co_return;
            }(sender, i));
            stop.request_stop();
            co_await std::move(send_task);
            std::optional<int> got;
            try {
                got = co_await std::move(waiter);
            } catch (const eddy::OperationCancelled&) {
                got = receiver.try_receive();  // not taken: still there for this receiver
            }
            if (got != i) ++misses;
            if (receiver.try_receive().has_value()) ++misses;  // and taken once only
        }
        co_return misses;
    }(tx, rx));
    CHECK(lost == 0);
}

TEST_CASE("senders and receivers on four workers: each receiver's values and lags account for every send") {
    // Small ring, fast senders: receivers lag. For each receiver, values received plus
    // values reported lost equal the values sent; each sender's values arrive in order.
    Runtime rt(RuntimeConfig{.workers = 4});
    auto [tx, rx] = eddy::broadcast::channel<std::int64_t>(8);
    constexpr std::int64_t kSenders = 4, kPerSender = 2000;
    constexpr int kReceivers = 5;
    std::vector<JoinHandle<Log>> receivers;
    for (int i = 0; i < kReceivers - 1; ++i) receivers.push_back(rt.spawn(drain(tx.subscribe())));
    receivers.push_back(rt.spawn(drain(std::move(rx))));
    rt.block_on([](Sender<std::int64_t> sender) -> Task<void> {
        std::vector<JoinHandle<void>> senders;
        for (std::int64_t s = 0; s < kSenders; ++s) {
            senders.push_back(eddy::spawn([](Sender<std::int64_t> producer, std::int64_t id) -> Task<void> {
                for (std::int64_t i = 0; i < kPerSender; ++i) {
                    producer.send(id * kPerSender + i);
                    if (i % 16 == 0) co_await eddy::yield_now();
                }
            }(sender, s)));
        }
        for (auto& h : senders) co_await std::move(h);
    }(std::move(tx)));  // every sender copy is gone: the receivers end
    for (auto& h : receivers) {
        const Log log = rt.block_on(
            [](JoinHandle<Log> handle) -> Task<Log> { co_return co_await std::move(handle); }(std::move(h)));
        std::uint64_t missed = 0;
        int wrong = 0;
        for (std::uint64_t n : log.lags) {
            wrong += n > 0 ? 0 : 1;
            missed += n;
        }
        std::vector<std::int64_t> last(kSenders, -1);
        std::uint64_t received = 0;
        for (std::int64_t v : log.values) {
            if (v < 0) continue;
            ++received;
            const auto s = static_cast<std::size_t>(v / kPerSender);
            wrong += v > last[s] ? 0 : 1;  // one sender's values stay in order
            last[s] = v;
        }
        CHECK(wrong == 0);
        CHECK(received + missed == static_cast<std::uint64_t>(kSenders * kPerSender));
    }
}

TEST_CASE("one sender, a slow receiver: after each Lagged the next value is exactly the count further on") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto [tx, rx] = eddy::broadcast::channel<std::int64_t>(4);
    constexpr std::int64_t kValues = 5000;
    JoinHandle<Log> slow = rt.spawn(drain(std::move(rx), true));
    std::thread sender([s = std::move(tx)]() mutable {
        for (std::int64_t i = 0; i < kValues; ++i) s.send(i);
    });
    sender.join();
    const Log log =
        rt.block_on([](JoinHandle<Log> h) -> Task<Log> { co_return co_await std::move(h); }(std::move(slow)));
    std::int64_t expected = 0;
    std::size_t lag = 0;
    int wrong = 0;
    for (std::size_t i = 0; i < log.values.size(); ++i) {
        if (log.values[i] < 0) {
            expected += static_cast<std::int64_t>(log.lags[lag++]);
            continue;
        }
        if (log.values[i] != expected) ++wrong;
        expected = log.values[i] + 1;
    }
    CHECK(wrong == 0);
    CHECK(expected == kValues);  // ends on the last value sent
}

TEST_CASE("a runtime destroyed while receivers wait unlinks them; the channel works on") {
    eddy::test::LifetimeCounter frames;
    auto [tx, rx] = eddy::broadcast::channel<int>(4);
    {
        Runtime rt(RuntimeConfig{.workers = 2});
        std::atomic<int> waiting{0};
        for (int i = 0; i < 10; ++i) {
            (void)rt.spawn([](Receiver<int> receiver, std::atomic<int>& arrived, eddy::test::Counted) -> Task<void> {
                arrived.fetch_add(1);
                (void)co_await receiver.receive();
            }(tx.subscribe(), waiting, eddy::test::Counted(frames)));
        }
        const auto deadline = std::chrono::steady_clock::now() + eddy::test::kDeadline;
        while (waiting.load() < 10 && !eddy::test::past(deadline)) std::this_thread::yield();
    }
    CHECK(frames.alive() == 0);
    CHECK(tx.receiver_count() == 1);
    CHECK(tx.send(1) == 1);  // touches no destroyed waiter (ASan)
    CHECK(rx.try_receive() == 1);
}

TEST_CASE("misuse: capacity 0, receiving off a worker, a moved-from end") {
    CHECK_THROWS_AS((void)eddy::broadcast::channel<int>(0), std::invalid_argument);

    auto [tx, rx] = eddy::broadcast::channel<int>(2);
    tx.send(1);
    std::string how;
    Receiver<int>& r = rx;  // a lambda cannot capture a structured binding (clang 14)
    eddy::test::await_off_worker([&r] { return r.receive(); }, how);
    CHECK(how == "wrong thread");
    CHECK(rx.try_receive() == 1);  // nothing consumed

    Receiver<int> moved = std::move(rx);
    CHECK_THROWS_AS((void)rx.try_receive(), eddy::ChannelClosed);
    CHECK_THROWS_AS((void)rx.receive(), eddy::ChannelClosed);
    CHECK_THROWS_AS((void)rx.resubscribe(), eddy::ChannelClosed);
    CHECK_THROWS_AS((void)rx.is_closed(), eddy::ChannelClosed);
    Sender<int> moved_tx = std::move(tx);
    Sender<int> copy_of_empty = tx;  // copying an empty sender gives an empty sender
    CHECK_THROWS_AS((void)tx.send(2), eddy::ChannelClosed);
    CHECK_THROWS_AS((void)copy_of_empty.subscribe(), eddy::ChannelClosed);
    CHECK_THROWS_AS((void)tx.receiver_count(), eddy::ChannelClosed);
    CHECK(moved_tx.send(3) == 1);
    CHECK(moved.try_receive() == 3);
}

}  // TEST_SUITE("sync/broadcast")
