// tests/runtime/inject_queue_test.cpp: white-box tests of runtime/inject_queue.hpp.
//
// The queue carries QueueItems (a coroutine frame address and a stamp); here the addresses of
// the bytes of one array, each with its index + 1 as the stamp, so that an item maps back to
// its index, the stamp is seen to travel with it, and, in TSan builds, the adapter's
// __tsan_release/__tsan_acquire calls get real application addresses as they do in eddy.
// Order is promised per producer only (moodycamel's guarantee), so no test relies on order
// across producers. The multi-producer multi-consumer case checks that every item arrives
// exactly once, and that each consumer sees each producer's items in push order.
#include "inject_queue.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

using eddy::detail::InjectQueue;
using eddy::detail::QueueItem;

namespace {

/// Distinct, real addresses standing in for coroutine frames.
class Items {
public:
    explicit Items(std::size_t n) : bytes_(n) {}
    QueueItem at(std::size_t i) noexcept { return QueueItem{&bytes_[i], i + 1}; }
    /// The item's index; SIZE_MAX when its stamp does not match it.
    std::size_t index_of(const QueueItem& item) const noexcept {
        const auto i = static_cast<std::size_t>(static_cast<const char*>(item.task) - bytes_.data());
        return item.stamp == i + 1 ? i : SIZE_MAX;
    }
    std::size_t size() const noexcept { return bytes_.size(); }

private:
    std::vector<char> bytes_;
};

// Tokens live on the heap, as they do inside Worker: held on the stack, GCC 12 at -O3 reports
// a false -Wmaybe-uninitialized in ~ProducerToken once ~TokenHolder's reset() and ~optional
// are both inlined (a werror build failure, not a bug in the queue).
template <class Token>
std::unique_ptr<Token> make_token(InjectQueue& q) {
    return std::make_unique<Token>(q);
}

std::vector<QueueItem> drain(InjectQueue& q, std::size_t batch) {
    std::vector<QueueItem> out;
    std::vector<QueueItem> buf(batch);
    while (std::size_t n = q.pop_bulk(buf.data(), batch)) out.insert(out.end(), buf.begin(), buf.begin() + n);
    return out;
}

}  // namespace

TEST_SUITE("runtime/inject_queue") {

TEST_CASE("an item pushed without a token is popped back") {
    InjectQueue q;
    Items items(1);
    q.push(items.at(0));
    QueueItem out[4] = {};
    REQUIRE(q.pop_bulk(out, 4) == 1);
    CHECK(out[0] == items.at(0));
    CHECK(q.pop_bulk(out, 4) == 0);
}

TEST_CASE("pop_bulk on an empty queue returns zero") {
    InjectQueue q;
    QueueItem out[4] = {};
    CHECK(q.pop_bulk(out, 4) == 0);
    auto consumer = make_token<InjectQueue::ConsumerToken>(q);
    CHECK(q.pop_bulk(*consumer, out, 4) == 0);
}

TEST_CASE("pop_bulk takes no more than max items") {
    InjectQueue q;
    Items items(10);
    for (std::size_t i = 0; i < items.size(); ++i) q.push(items.at(i));
    QueueItem out[10] = {};
    CHECK(q.pop_bulk(out, 3) == 3);
    CHECK(drain(q, 4).size() == 7);
}

TEST_CASE("push_bulk with a producer token and pop_bulk with a consumer token round-trip every item in order") {
    InjectQueue q;
    Items items(1000);  // several of moodycamel's blocks
    std::vector<QueueItem> in;
    for (std::size_t i = 0; i < items.size(); ++i) in.push_back(items.at(i));
    auto producer = make_token<InjectQueue::ProducerToken>(q);
    for (std::size_t i = 0; i < in.size(); i += 100) q.push_bulk(*producer, in.data() + i, 100);

    auto consumer = make_token<InjectQueue::ConsumerToken>(q);
    std::vector<QueueItem> out;
    QueueItem buf[17];
    while (std::size_t n = q.pop_bulk(*consumer, buf, 17)) out.insert(out.end(), buf, buf + n);
    CHECK(out == in);
}

TEST_CASE("items from each producer come out in the order that producer pushed them") {
    InjectQueue q;
    Items items(3000);
    // Producer 1: another thread, implicit token, items 0..999.
    std::thread other([&] {
        for (std::size_t i = 0; i < 1000; ++i) q.push(items.at(i));
    });
    // Producer 2: this thread with a token, in bulk, items 1000..1999; producer 3: this
    // thread without a token, items 2000..2999, interleaved with producer 2.
    {
        auto producer = make_token<InjectQueue::ProducerToken>(q);
        for (std::size_t i = 0; i < 1000; i += 10) {
            QueueItem batch[10];
            for (std::size_t j = 0; j < 10; ++j) batch[j] = items.at(1000 + i + j);
            q.push_bulk(*producer, batch, 10);
            for (std::size_t j = 0; j < 10; ++j) q.push(items.at(2000 + i + j));
        }
        other.join();
        const std::vector<QueueItem> out = drain(q, 7);
        REQUIRE(out.size() == 3000);
        std::vector<std::size_t> per_producer[3];
        for (const QueueItem& p : out) {
            const std::size_t i = items.index_of(p);
            REQUIRE(i != SIZE_MAX);
            per_producer[i / 1000].push_back(i);
        }
        for (auto& seq : per_producer) {
            CHECK(seq.size() == 1000);
            CHECK(std::is_sorted(seq.begin(), seq.end()));
        }
    }
}

TEST_CASE("size_approx is exact when nobody else uses the queue") {
    InjectQueue q;
    Items items(5);
    CHECK(q.size_approx() == 0);
    for (std::size_t i = 0; i < items.size(); ++i) q.push(items.at(i));
    CHECK(q.size_approx() == 5);
    QueueItem out[2];
    REQUIRE(q.pop_bulk(out, 2) == 2);
    CHECK(q.size_approx() == 3);
    CHECK(drain(q, 8).size() == 3);
    CHECK(q.size_approx() == 0);
}

TEST_CASE("with four producers and three consumers every item is received exactly once") {
    constexpr std::size_t kProducers = 4;
    constexpr std::size_t kPerProducer = 50'000;
    constexpr std::size_t kTotal = kProducers * kPerProducer;
    constexpr int kConsumers = 3;
    InjectQueue q;
    Items items(kTotal);  // producer p owns indices [p * kPerProducer, (p + 1) * kPerProducer)

    std::vector<std::atomic<unsigned char>> seen(kTotal);
    std::atomic<std::size_t> received{0};
    std::atomic<int> producers_left{static_cast<int>(kProducers)};
    std::atomic<int> out_of_order{0};
    std::atomic<int> mismatched{0};

    std::vector<std::thread> threads;
    for (std::size_t p = 0; p < kProducers; ++p) {
        threads.emplace_back([&, p] {
            const std::size_t base = p * kPerProducer;
            if (p % 2 == 0) {
                for (std::size_t i = 0; i < kPerProducer; ++i) q.push(items.at(base + i));
            } else {
                auto token = make_token<InjectQueue::ProducerToken>(q);
                QueueItem batch[64];
                std::size_t i = 0;
                for (std::size_t len = 1; i < kPerProducer; len = len % 64 + 1) {
                    const std::size_t n = std::min(len, kPerProducer - i);
                    for (std::size_t j = 0; j < n; ++j) batch[j] = items.at(base + i + j);
                    q.push_bulk(*token, batch, n);
                    i += n;
                }
            }
            producers_left.fetch_sub(1, std::memory_order_release);
        });
    }
    for (int c = 0; c < kConsumers; ++c) {
        threads.emplace_back([&, c] {
            std::unique_ptr<InjectQueue::ConsumerToken> token;
            if (c != 0) token = make_token<InjectQueue::ConsumerToken>(q);  // consumer 0: token-less
            std::vector<std::size_t> last_from(kProducers, 0);              // last index + 1 per producer
            QueueItem buf[32];
            // A safety net, not a synchronization: if items were lost, stop after this many
            // empty polls once every producer is done, and let the checks below fail.
            std::size_t empty_polls_after_done = 0;
            while (received.load(std::memory_order_relaxed) < kTotal) {
                const std::size_t n = token ? q.pop_bulk(*token, buf, 32) : q.pop_bulk(buf, 32);
                if (n == 0) {
                    if (producers_left.load(std::memory_order_acquire) == 0 && ++empty_polls_after_done > 1'000'000)
                        return;
                    std::this_thread::yield();
                    continue;
                }
                empty_polls_after_done = 0;
                for (std::size_t k = 0; k < n; ++k) {
                    const std::size_t i = items.index_of(buf[k]);
                    if (i == SIZE_MAX) {  // a stamp that did not travel with its task
                        mismatched.fetch_add(1, std::memory_order_relaxed);
                        continue;
                    }
                    seen[i].fetch_add(1, std::memory_order_relaxed);
                    const std::size_t p = i / kPerProducer;
                    if (i < last_from[p]) out_of_order.fetch_add(1, std::memory_order_relaxed);
                    last_from[p] = i + 1;
                }
                received.fetch_add(n, std::memory_order_relaxed);
            }
        });
    }
    for (auto& t : threads) t.join();

    CHECK(received.load() == kTotal);
    const std::vector<QueueItem> left = drain(q, 64);
    CHECK(left.empty());
    for (const QueueItem& p : left)
        if (items.index_of(p) != SIZE_MAX) seen[items.index_of(p)].fetch_add(1, std::memory_order_relaxed);
    std::size_t lost = 0;
    std::size_t duplicated = 0;
    for (auto& s : seen) {
        const unsigned char v = s.load(std::memory_order_relaxed);
        if (v == 0) ++lost;
        if (v > 1) ++duplicated;
    }
    CHECK(lost == 0);
    CHECK(duplicated == 0);
    CHECK(out_of_order.load() == 0);
    CHECK(mismatched.load() == 0);
    CHECK(q.size_approx() == 0);
}

}  // TEST_SUITE("runtime/inject_queue")
