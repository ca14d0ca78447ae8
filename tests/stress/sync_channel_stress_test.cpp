// tests/stress/sync_channel_stress_test.cpp: the channels (Channel, UnboundedChannel,
// broadcast, watch) under load, with receives cancelled at random racing the sends.
//
// Outcomes are checked exactly: every value sent is received once; a broadcast receiver
// accounts for every value sent: received, or reported lost by a Lagged whose count matches
// the gap exactly; a watch receiver never goes backwards. tests/stress/sync_stress.hpp gives
// the worker counts and rounds.

#include <eddy/eddy.hpp>

#include "stress/sync_stress.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

using eddy::JoinHandle;
using eddy::Task;
using eddy::test::sync_stress::for_each_configuration;

namespace {

constexpr const char* kProgram = "sync_channel_stress";

#ifdef EDDY_TEST_TSAN
constexpr std::uint64_t kPerProducer = 500;
#else
constexpr std::uint64_t kPerProducer = 3000;
#endif
constexpr std::uint64_t kProducers = 6;
constexpr std::uint64_t kConsumers = 6;

template <class Ch>
Task<std::optional<std::uint64_t>> receive_one(Ch& ch) {
    co_return co_await ch.receive();
}

/// Awaits `op`; the `i`-th call, when `i` is a multiple of 3, runs it under a token that
/// another task stops after a yield, so the stop races the operation's wait. Returns
/// std::nullopt, counted in `cancelled`, when the stop won (the operation had no effect).
template <class T>
Task<std::optional<T>> racing_stop_every_third(Task<T> op, std::uint64_t i, std::atomic<std::uint64_t>& cancelled) {
    std::optional<T> v;
    if (i % 3 != 0) {
        v.emplace(co_await std::move(op));
        co_return v;
    }
    std::stop_source stop;
    JoinHandle<void> stopper = eddy::spawn([](std::stop_source s) -> Task<void> {
        co_await eddy::yield_now();
        s.request_stop();
    }(stop));
    try {
        v.emplace(co_await eddy::with_stop_token(std::move(op), stop.get_token()));
    } catch (const eddy::OperationCancelled&) {
        cancelled.fetch_add(1, std::memory_order_relaxed);
    }
    co_await std::move(stopper);
    co_return v;
}

/// Receives from a Channel or an UnboundedChannel until end-of-stream; every third receive
/// runs under a racing stop, so cancellations race the senders' handoffs. Returns the sum
/// and count of what it received (a cancelled receive must not have taken anything).
template <class Ch>
Task<std::pair<std::uint64_t, std::uint64_t>> consumer(Ch& ch, std::atomic<std::uint64_t>& cancelled) {
    std::uint64_t sum = 0, count = 0;
    for (std::uint64_t i = 0;; ++i) {
        const std::optional<std::optional<std::uint64_t>> got =
            co_await racing_stop_every_third(receive_one(ch), i, cancelled);
        if (!got) continue;  // cancelled
        if (!*got) break;    // closed and drained
        sum += **got;
        ++count;
    }
    co_return std::pair{sum, count};
}

/// Awaits every consumer; returns the sum and count of all they received.
Task<std::pair<std::uint64_t, std::uint64_t>> totals(
    std::vector<JoinHandle<std::pair<std::uint64_t, std::uint64_t>>>& consumers) {
    std::uint64_t sum = 0, count = 0;
    for (auto& c : consumers) {
        const auto [s, n] = co_await std::move(c);
        sum += s;
        count += n;
    }
    co_return std::pair{sum, count};
}

Task<void> producer(eddy::Channel<std::uint64_t>& ch, std::uint64_t id) {
    for (std::uint64_t i = 0; i < kPerProducer; ++i) co_await ch.send(id * kPerProducer + i + 1);
}

Task<void> unbounded_producer(eddy::UnboundedChannel<std::uint64_t>& ch, std::uint64_t id) {
    for (std::uint64_t i = 0; i < kPerProducer; ++i) {
        ch.send(id * kPerProducer + i + 1);
        if (i % 32 == 0) co_await eddy::yield_now();  // let the consumers interleave
    }
}

/// One broadcast receive: a value (nullopt at the end) or the count a Lagged reported.
struct Got {
    std::optional<std::uint64_t> value;
    std::uint64_t missed = 0;
};

Task<Got> broadcast_receive(eddy::broadcast::Receiver<std::uint64_t>& rx) {
    Got g;
    try {
        g.value = co_await rx.receive();
    } catch (const eddy::broadcast::Lagged& lag) {
        g.missed = lag.missed();
    }
    co_return g;
}

/// What a broadcast receiver saw of the values 1..N sent in order by one sender.
struct Tally {
    std::uint64_t received = 0;
    std::uint64_t missed = 0;  // the sum of the Lagged counts
    std::uint64_t wrong = 0;   // values that were not exactly the one expected
    std::uint64_t last = 0;
};

/// Receives until the end; every third receive runs under a racing stop. Each value must be
/// the one after the previous, or after the previous plus the lag reported in between.
Task<Tally> broadcast_consumer(eddy::broadcast::Receiver<std::uint64_t> rx, std::atomic<std::uint64_t>& cancelled) {
    Tally t;
    std::uint64_t expected = 1;
    for (std::uint64_t i = 0;; ++i) {
        const std::optional<Got> got = co_await racing_stop_every_third(broadcast_receive(rx), i, cancelled);
        if (!got) continue;  // cancelled: consumed nothing
        const Got& g = *got;
        if (g.missed != 0) {
            t.missed += g.missed;
            expected += g.missed;
            continue;
        }
        if (!g.value) break;
        if (*g.value != expected) ++t.wrong;
        expected = *g.value + 1;
        t.last = *g.value;
        ++t.received;
    }
    co_return t;
}

/// The value after the next change, or nullopt once the sender is gone.
Task<std::optional<std::uint64_t>> watch_next(eddy::watch::Receiver<std::uint64_t>& rx) {
    try {
        co_await rx.changed();
    } catch (const eddy::ChannelClosed&) {
        co_return std::nullopt;
    }
    co_return *rx.borrow();
}

/// Follows the watched value until the sender is gone; every third changed() runs under a
/// racing stop. Returns the last value seen, or 0 if it ever went backwards.
Task<std::uint64_t> watch_follower(eddy::watch::Receiver<std::uint64_t> rx, std::atomic<std::uint64_t>& cancelled) {
    std::uint64_t last = 0;
    for (std::uint64_t i = 0;; ++i) {
        const std::optional<std::optional<std::uint64_t>> got =
            co_await racing_stop_every_third(watch_next(rx), i, cancelled);
        if (!got) continue;  // cancelled: marked nothing seen
        if (!*got) break;    // the sender is gone
        if (**got < last) co_return 0;
        last = **got;
    }
    co_return last;
}

}  // namespace

TEST_SUITE("stress/sync") {

TEST_CASE("a channel with receives cancelled at random loses and duplicates nothing") {
    for_each_configuration(kProgram, [](std::size_t workers) {
        eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
        eddy::Channel<std::uint64_t> ch(4);
        std::atomic<std::uint64_t> cancelled{0};
        const auto [sum, count] =
            rt.block_on([](eddy::Channel<std::uint64_t>& chan,
                           std::atomic<std::uint64_t>& stops) -> Task<std::pair<std::uint64_t, std::uint64_t>> {
                std::vector<JoinHandle<std::pair<std::uint64_t, std::uint64_t>>> consumers;
                std::vector<JoinHandle<void>> producers;
                for (std::uint64_t i = 0; i < kConsumers; ++i) consumers.push_back(eddy::spawn(consumer(chan, stops)));
                for (std::uint64_t i = 0; i < kProducers; ++i) producers.push_back(eddy::spawn(producer(chan, i)));
                for (auto& p : producers) co_await std::move(p);
                chan.close();
                co_return co_await totals(consumers);
            }(ch, cancelled));
        constexpr std::uint64_t kAll = kProducers * kPerProducer;
        CHECK(count == kAll);
        CHECK(sum == kAll * (kAll + 1) / 2);
        CHECK(ch.size() == 0);
    });
}

TEST_CASE(
    "an unbounded channel fed by tasks and a plain thread, receives cancelled at random, loses and duplicates "
    "nothing") {
    for_each_configuration(kProgram, [](std::size_t workers) {
        eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
        eddy::UnboundedChannel<std::uint64_t> ch;
        std::atomic<std::uint64_t> cancelled{0};
        std::vector<JoinHandle<std::pair<std::uint64_t, std::uint64_t>>> consumers;
        for (std::uint64_t i = 0; i < kConsumers; ++i) consumers.push_back(rt.spawn(consumer(ch, cancelled)));
        std::thread feeder([&ch] {  // producer number kProducers, off the runtime
            for (std::uint64_t i = 0; i < kPerProducer; ++i) ch.send(kProducers * kPerProducer + i + 1);
        });
        const auto [sum, count] =
            rt.block_on([](eddy::UnboundedChannel<std::uint64_t>& chan, std::thread& thread,
                           std::vector<JoinHandle<std::pair<std::uint64_t, std::uint64_t>>>& receivers)
                            -> Task<std::pair<std::uint64_t, std::uint64_t>> {
                std::vector<JoinHandle<void>> producers;
                for (std::uint64_t i = 0; i < kProducers; ++i)
                    producers.push_back(eddy::spawn(unbounded_producer(chan, i)));
                for (auto& p : producers) co_await std::move(p);
                thread.join();  // quick by now: its sends never wait
                chan.close();
                co_return co_await totals(receivers);
            }(ch, feeder, consumers));
        constexpr std::uint64_t kAll = (kProducers + 1) * kPerProducer;
        CHECK(count == kAll);
        CHECK(sum == kAll * (kAll + 1) / 2);
        CHECK(ch.size() == 0);
    });
}

TEST_CASE("broadcast receivers with receives cancelled at random account for every value: received or reported lost") {
    for_each_configuration(kProgram, [](std::size_t workers) {
        eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
        auto [tx, rx] = eddy::broadcast::channel<std::uint64_t>(16);  // small: receivers lag
        std::atomic<std::uint64_t> cancelled{0};
        constexpr std::uint64_t kAll = kPerProducer * 2;
        std::vector<JoinHandle<Tally>> receivers;
        for (std::uint64_t i = 1; i < kConsumers; ++i)
            receivers.push_back(rt.spawn(broadcast_consumer(tx.subscribe(), cancelled)));
        receivers.push_back(rt.spawn(broadcast_consumer(std::move(rx), cancelled)));
        rt.block_on([](eddy::broadcast::Sender<std::uint64_t> sender) -> Task<void> {
            for (std::uint64_t v = 1; v <= kAll; ++v) {
                sender.send(v);
                if (v % 8 == 0) co_await eddy::yield_now();
            }
        }(std::move(tx)));  // the only sender ends with the task: the stream ends
        for (auto& h : receivers) {
            const Tally t = rt.block_on([](JoinHandle<Tally> receiver) -> Task<Tally> {
                co_return co_await std::move(receiver);
            }(std::move(h)));
            CHECK(t.wrong == 0);
            CHECK(t.received + t.missed == kAll);
            CHECK(t.last == kAll);  // the last value is never lost
        }
    });
}

TEST_CASE("watch receivers with changed() cancelled at random never go backwards and all see the last value") {
    for_each_configuration(kProgram, [](std::size_t workers) {
        eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
        auto [tx, rx] = eddy::watch::channel<std::uint64_t>(0);
        std::atomic<std::uint64_t> cancelled{0};
        constexpr std::uint64_t kAll = kPerProducer * 2;
        std::vector<JoinHandle<std::uint64_t>> followers;
        for (std::uint64_t i = 0; i < kConsumers; ++i) followers.push_back(rt.spawn(watch_follower(rx, cancelled)));
        { eddy::watch::Receiver<std::uint64_t> dropped = std::move(rx); }
        rt.block_on([](eddy::watch::Sender<std::uint64_t> sender) -> Task<void> {
            for (std::uint64_t v = 1; v <= kAll; ++v) {
                if (v % 2 == 0) {
                    sender.send(v);
                } else {
                    sender.send_modify([v](std::uint64_t& x) { x = v; });
                }
                if (v % 8 == 0) co_await eddy::yield_now();
            }
        }(std::move(tx)));  // the sender is dropped: the followers end after the last value
        for (auto& h : followers) {
            const std::uint64_t last = rt.block_on([](JoinHandle<std::uint64_t> follower) -> Task<std::uint64_t> {
                co_return co_await std::move(follower);
            }(std::move(h)));
            CHECK(last == kAll);
        }
    });
}

}  // TEST_SUITE("stress/sync")
