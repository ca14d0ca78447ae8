// tests/sync/broadcast_test.cpp: eddy::broadcast: every receiver gets every value in
// order, subscribe and resubscribe, lag reported with exact counts (try_receive and receive),
// len() and is_empty() (also read from a plain thread while a task receives),
// the senders' end (drain, then nullopt; waiting receivers), cancellation without loss,
// races of stops and sends, multi-worker senders and receivers with exact accounting,
// runtime shutdown while receivers wait, and misuse.
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

using eddy::JoinHandle;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::broadcast::Lagged;
using eddy::broadcast::Receiver;
using eddy::broadcast::Sender;
using eddy::test::outcome;
using eddy::test::settle;

namespace {

Task<std::optional<int>> receive_one(Receiver<int>& rx) { co_return co_await rx.receive(); }

/// What a receiver saw until the end of the stream: the values, and each lag's count in
/// `lags` (in `values`, a lag is marked by the value -1).
struct Log {
    std::vector<std::int64_t> values;
    std::vector<std::uint64_t> lags;
};

/// Receives until the end of the stream; a `slow` receiver yields after each value, to fall
/// behind a fast sender.
Task<Log> drain(Receiver<std::int64_t> rx, bool slow = false) {
    Log log;
    for (;;) {
        try {
            std::optional<std::int64_t> v = co_await rx.receive();
            if (!v) break;
            log.values.push_back(*v);
            if (slow) co_await eddy::yield_now();
        } catch (const Lagged& lag) {
            log.lags.push_back(lag.missed());
            log.values.push_back(-1);
        }
    }
    co_return log;
}

/// try_receive until empty; "L<n>" for a lag of n.
std::vector<std::string> try_drain(Receiver<int>& rx) {
    std::vector<std::string> got;
    for (;;) {
        try {
            std::optional<int> v = rx.try_receive();
            if (!v) break;
            got.push_back(std::to_string(*v));
        } catch (const Lagged& lag) {
            got.push_back("L" + std::to_string(lag.missed()));
        }
    }
    return got;
}

} // namespace

TEST_SUITE("sync/broadcast") {

TEST_CASE("every receiver gets every value in order; send counts the receivers") {
    auto [tx, rx] = eddy::broadcast::channel<int>(8);
    Receiver<int> other = tx.subscribe();
    CHECK(tx.receiver_count() == 2);
    CHECK(tx.send(1) == 2);
    CHECK(tx.send(2) == 2);
    Receiver<int> late = rx.resubscribe();  // sees what is sent from now on
    CHECK(tx.send(3) == 3);
    CHECK(try_drain(rx) == std::vector<std::string>{"1", "2", "3"});
    CHECK(try_drain(other) == std::vector<std::string>{"1", "2", "3"});
    CHECK(try_drain(late) == std::vector<std::string>{"3"});
    CHECK(rx.try_receive() == std::nullopt);  // empty, not closed
    CHECK_FALSE(rx.is_closed());
}

TEST_CASE("with no receivers a send returns 0 and drops the value; a later subscriber does not see it") {
    eddy::test::LifetimeCounter counter;
    {
        auto [tx, rx] = eddy::broadcast::channel<eddy::test::Counted>(4);
        { Receiver<eddy::test::Counted> dropped = std::move(rx); }
        CHECK(tx.receiver_count() == 0);
        CHECK(tx.send(eddy::test::Counted(counter, 1)) == 0);
        CHECK(counter.alive() == 0);
        Receiver<eddy::test::Counted> late = tx.subscribe();
        CHECK(tx.send(eddy::test::Counted(counter, 2)) == 1);
        CHECK(late.try_receive()->value() == 2);
        CHECK_FALSE(late.try_receive().has_value());
    }
    CHECK(counter.alive() == 0);  // values in the ring go with the last end
}

TEST_CASE("a receiver that fell behind gets Lagged with the exact count, then the oldest value kept") {
    auto [tx, rx] = eddy::broadcast::channel<int>(4);
    Receiver<int> keeps_up = tx.subscribe();
    for (int i = 1; i <= 3; ++i) tx.send(i);
    CHECK(try_drain(keeps_up) == std::vector<std::string>{"1", "2", "3"});
    for (int i = 4; i <= 10; ++i) tx.send(i);
    // rx never read: 10 sent, the ring keeps 7..10, so 6 were lost.
    CHECK(try_drain(rx) == std::vector<std::string>{"L6", "7", "8", "9", "10"});
    // keeps_up had read 3: 4..10 is 7 values, 3 more than the ring holds.
    CHECK(try_drain(keeps_up) == std::vector<std::string>{"L3", "7", "8", "9", "10"});
    // Exactly full is not a lag.
    for (int i = 11; i <= 14; ++i) tx.send(i);
    CHECK(try_drain(rx) == std::vector<std::string>{"11", "12", "13", "14"});
    // Capacity 1: every value but the last is lost.
    auto [tx1, rx1] = eddy::broadcast::channel<int>(1);
    for (int i = 1; i <= 5; ++i) tx1.send(i);
    CHECK(try_drain(rx1) == std::vector<std::string>{"L4", "5"});
}

TEST_CASE("len() counts how far behind a receiver is, lost values included; is_empty() is len() == 0") {
    auto [tx, rx] = eddy::broadcast::channel<int>(4);
    CHECK(rx.len() == 0);
    CHECK(rx.is_empty());
    for (int i = 1; i <= 3; ++i) tx.send(i);
    CHECK(rx.len() == 3);
    CHECK_FALSE(rx.is_empty());
    CHECK(rx.try_receive() == 1);
    CHECK(rx.len() == 2);
    Receiver<int> late = tx.subscribe();  // starts at the tail
    CHECK(late.len() == 0);
    CHECK(late.is_empty());
    // Past the capacity: rx is 6 behind (2, 3 and 4..7), 2 of which the ring lost.
    for (int i = 4; i <= 7; ++i) tx.send(i);
    CHECK(rx.len() == 6);
    CHECK(late.len() == 4);  // exactly full: no lag
    CHECK(try_drain(rx) == std::vector<std::string>{"L2", "4", "5", "6", "7"});
    CHECK(rx.len() == 0);
    CHECK(try_drain(late) == std::vector<std::string>{"4", "5", "6", "7"});
    // Far behind: every value it missed, and the lag as before.
    for (int i = 8; i <= 20; ++i) tx.send(i);
    CHECK(rx.len() == 13);
    CHECK(try_drain(rx) == std::vector<std::string>{"L9", "17", "18", "19", "20"});
    // Closed and drained: empty.
    { Sender<int> gone = std::move(tx); }
    CHECK(rx.is_closed());
    CHECK(rx.is_empty());
}

TEST_CASE("len() from a plain thread while a task receives and a worker sends: never above what was sent") {
    constexpr int kValues = 20'000;
    constexpr std::size_t kCapacity = 16;
    Runtime rt(RuntimeConfig{.workers = 2});
    auto [tx, rx] = eddy::broadcast::channel<int>(kCapacity);
    std::atomic<bool> done{false};
    std::atomic<std::size_t> above{0};
    std::atomic<std::uint64_t> looks{0};
    std::thread watcher([&, &rx = rx] {
        while (!done.load()) {
            if (rx.len() > static_cast<std::size_t>(kValues)) above.fetch_add(1);
            looks.fetch_add(1);
        }
    });
    JoinHandle<std::uint64_t> receiver = rt.spawn([](Receiver<int>& rx) -> Task<std::uint64_t> {
        std::uint64_t got = 0;  // values and lost values: every send once
        for (;;) {
            try {
                const std::optional<int> v = co_await rx.receive();
                if (!v) co_return got;
                ++got;
            } catch (const Lagged& lag) {
                got += lag.missed();
            }
        }
    }(rx));
    rt.block_on([](Sender<int> tx) -> Task<void> {
        for (int i = 0; i < kValues; ++i) {
            tx.send(i);
            if (i % 64 == 0) co_await eddy::yield_now();
        }
    }(std::move(tx)));  // the last sender goes with this task: the receiver ends
    const std::uint64_t accounted = rt.block_on([](JoinHandle<std::uint64_t> h) -> Task<std::uint64_t> {
        co_return co_await std::move(h);
    }(std::move(receiver)));
    done = true;
    watcher.join();
    CHECK(accounted == kValues);
    CHECK(above.load() == 0);
    CHECK(looks.load() > 0);
    CHECK(rx.len() == 0);
}

TEST_CASE("Lagged is what co_await receive throws too, and the next receive goes on from the oldest value") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto [tx, rx] = eddy::broadcast::channel<int>(2);
    for (int i = 1; i <= 5; ++i) tx.send(i);
    const std::vector<std::string> got = rt.block_on([](Receiver<int>& rx) -> Task<std::vector<std::string>> {
        std::vector<std::string> got;
        try {
            co_await rx.receive();
            got.push_back("no lag");
        } catch (const Lagged& lag) {
            got.push_back("L" + std::to_string(lag.missed()));
            got.push_back(lag.what());
        }
        got.push_back(std::to_string(*co_await rx.receive()));
        got.push_back(std::to_string(*co_await rx.receive()));
        co_return got;
    }(rx));
    REQUIRE(got.size() == 4);
    CHECK(got[0] == "L3");
    CHECK(got[1].find("3 values") != std::string::npos);
    CHECK(got[2] == "4");
    CHECK(got[3] == "5");
}

TEST_CASE("a copy that throws reaches the receiver and consumes nothing: the next receive gets the value") {
    struct Fragile {
        int v;
        std::shared_ptr<bool> fail;  // shared by every copy: the test turns failures on and off
        Fragile(int value, std::shared_ptr<bool> f) : v(value), fail(std::move(f)) {}
        Fragile(const Fragile& o) : v(o.v), fail(o.fail) {
            if (*fail) throw std::runtime_error("copy failed");
        }
        Fragile(Fragile&&) noexcept = default;
        Fragile& operator=(const Fragile&) = default;
        Fragile& operator=(Fragile&&) noexcept = default;
    };
    auto fail = std::make_shared<bool>(false);
    auto [tx, rx] = eddy::broadcast::channel<Fragile>(4);
    tx.send(Fragile(1, fail));
    tx.send(Fragile(2, fail));
    *fail = true;
    CHECK_THROWS_AS((void)rx.try_receive(), std::runtime_error);
    Runtime rt(RuntimeConfig{.workers = 1});
    const std::string how = rt.block_on([](Receiver<Fragile>& rx) -> Task<std::string> {
        try {
            (void)co_await rx.receive();
            co_return "ok";
        } catch (const std::runtime_error& e) {
            co_return e.what();
        }
    }(rx));
    CHECK(how == "copy failed");
    *fail = false;
    CHECK(rx.try_receive()->v == 1);
    CHECK(rx.try_receive()->v == 2);
}

TEST_CASE("a send wakes every waiting receiver, and each gets the value") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto [tx, rx] = eddy::broadcast::channel<int>(4);
    std::vector<Receiver<int>> receivers;
    for (int i = 0; i < 5; ++i) receivers.push_back(tx.subscribe());
    const int sum = rt.block_on([](Sender<int>& tx, std::vector<Receiver<int>>& receivers) -> Task<int> {
        std::vector<JoinHandle<std::optional<int>>> waiting;
        for (auto& r : receivers) waiting.push_back(eddy::spawn(receive_one(r)));
        co_await settle();
        int sum = 0;
        for (auto& h : waiting) sum += h.is_finished() ? 1000 : 0;  // none may finish yet
        tx.send(7);
        for (auto& h : waiting) sum += *co_await std::move(h);
        co_return sum;
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
        const Log log = rt.block_on([](JoinHandle<Log> h) -> Task<Log> { co_return co_await std::move(h); }(std::move(h)));
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
    const Result r = rt.block_on([](Sender<int> tx, Receiver<int>& rx, Receiver<int>& waiter) -> Task<Result> {
        Result r;
        Sender<int> copy = tx;  // senders are copies: each keeps the channel open
        JoinHandle<std::optional<int>> first = eddy::spawn(receive_one(waiter));
        co_await settle();
        { Sender<int> dropped = std::move(tx); }  // not the last: `first` waits on
        co_await settle();
        copy.send(1);  // `first` gets it
        r.first = co_await std::move(first);
        copy.send(2);
        copy.send(3);
        copy.send(4);  // the ring keeps 2..4: rx (still at 1) lags by one value; waiter, at 2, does not
        for (int i = 0; i < 3; ++i) r.kept_up.push_back(co_await receive_one(waiter));
        JoinHandle<std::optional<int>> last = eddy::spawn(receive_one(waiter));
        co_await settle();
        { Sender<int> dropped = std::move(copy); }  // the last sender: the end
        r.last = co_await std::move(last);
        r.closed = rx.is_closed();
        r.drained = try_drain(rx);
        co_return r;
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
    const Result r = rt.block_on([](Sender<int>& tx, Receiver<int>& rx) -> Task<Result> {
        std::stop_source stop;
        JoinHandle<std::optional<int>> waiting = eddy::spawn(eddy::with_stop_token(receive_one(rx), stop.get_token()));
        co_await settle();
        stop.request_stop();
        Result r;
        r.cancelled = co_await outcome(std::move(waiting));
        tx.send(5);
        r.next = co_await rx.receive();
        co_return r;
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
    const std::string how = rt.block_on([](Receiver<int>& rx, std::stop_token t) -> Task<std::string> {
        co_return co_await outcome(eddy::spawn(eddy::with_stop_token(receive_one(rx), t)));
    }(rx, stop.get_token()));
    CHECK(how == "cancelled");
    CHECK(try_drain(rx) == std::vector<std::string>{"L1", "2"});
}

TEST_CASE("a receive whose stop races a send on two workers either gets the value or leaves it") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto [tx, rx] = eddy::broadcast::channel<int>(4);
    constexpr int kRounds = 300;
    const int lost = rt.block_on([](Sender<int>& tx, Receiver<int>& rx) -> Task<int> {
        int lost = 0;
        for (int i = 0; i < kRounds; ++i) {
            std::stop_source stop;
            JoinHandle<std::optional<int>> waiter = eddy::spawn(eddy::with_stop_token(receive_one(rx), stop.get_token()));
            JoinHandle<void> sender = eddy::spawn([](Sender<int>& tx, int v) -> Task<void> {
                tx.send(v);
                co_return;
            }(tx, i));
            stop.request_stop();
            co_await std::move(sender);
            std::optional<int> got;
            try {
                got = co_await std::move(waiter);
            } catch (const eddy::OperationCancelled&) {
                got = rx.try_receive();  // not taken: still there for this receiver
            }
            if (got != i) ++lost;
            if (rx.try_receive().has_value()) ++lost;  // and taken once only
        }
        co_return lost;
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
    rt.block_on([](Sender<std::int64_t> tx) -> Task<void> {
        std::vector<JoinHandle<void>> senders;
        for (std::int64_t s = 0; s < kSenders; ++s) {
            senders.push_back(eddy::spawn([](Sender<std::int64_t> tx, std::int64_t s) -> Task<void> {
                for (std::int64_t i = 0; i < kPerSender; ++i) {
                    tx.send(s * kPerSender + i);
                    if (i % 16 == 0) co_await eddy::yield_now();
                }
            }(tx, s)));
        }
        for (auto& h : senders) co_await std::move(h);
    }(std::move(tx)));  // every sender copy is gone: the receivers end
    for (auto& h : receivers) {
        const Log log = rt.block_on([](JoinHandle<Log> h) -> Task<Log> { co_return co_await std::move(h); }(std::move(h)));
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
    const Log log = rt.block_on([](JoinHandle<Log> h) -> Task<Log> { co_return co_await std::move(h); }(std::move(slow)));
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
            (void)rt.spawn([](Receiver<int> rx, std::atomic<int>& waiting, eddy::test::Counted) -> Task<void> {
                waiting.fetch_add(1);
                (void)co_await rx.receive();
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

} // TEST_SUITE
