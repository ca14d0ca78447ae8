// tests/sync/broadcast_values_test.cpp: what eddy::broadcast delivers: every receiver gets
// every value in order, subscribe and resubscribe, lag reported with exact counts
// (try_receive and receive), len() and is_empty() (also read from a plain thread while a task
// receives), and a copy that throws.
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
    JoinHandle<std::uint64_t> receiver = rt.spawn([](Receiver<int>& subscriber) -> Task<std::uint64_t> {
        std::uint64_t got = 0;  // values and lost values: every send once
        for (;;) {
            try {
                const std::optional<int> v = co_await subscriber.receive();
                if (!v) co_return got;
                ++got;
            } catch (const Lagged& lag) {
                got += lag.missed();
            }
        }
    }(rx));
    // The watcher looks at least once while the channel is in use: on a loaded machine its
    // thread may otherwise start only after the last send.
    while (looks.load() == 0) std::this_thread::yield();
    rt.block_on([](Sender<int> sender) -> Task<void> {
        for (int i = 0; i < kValues; ++i) {
            sender.send(i);
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
    const std::vector<std::string> got = rt.block_on([](Receiver<int>& receiver) -> Task<std::vector<std::string>> {
        std::vector<std::string> seen;
        try {
            co_await receiver.receive();
            seen.push_back("no lag");
        } catch (const Lagged& lag) {
            seen.push_back("L" + std::to_string(lag.missed()));
            seen.push_back(lag.what());
        }
        seen.push_back(std::to_string(*co_await receiver.receive()));
        seen.push_back(std::to_string(*co_await receiver.receive()));
        co_return seen;
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
    const std::string how = rt.block_on([](Receiver<Fragile>& receiver) -> Task<std::string> {
        try {
            (void)co_await receiver.receive();
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

}  // TEST_SUITE("sync/broadcast")
