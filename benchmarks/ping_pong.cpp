// benchmarks/ping_pong.cpp: P pairs of tasks bounce a token R times per pair through two
// bounded channels of capacity 1 (shared/bench/SPEC.md). One round is a ping (A -> B) and a
// pong (B -> A): 2 messages. As in the Tokio anchor, B replies token + 1 until A closes its
// channel, A checks every reply, and both tasks count what they sent or received.
#include "bench_main.hpp"

#include <memory>
#include <vector>

namespace {

struct Pair {
    eddy::Channel<std::uint64_t> ab{1};
    eddy::Channel<std::uint64_t> ba{1};
};

struct Counts {
    std::atomic<std::uint64_t> messages{0};
    std::atomic<std::uint64_t> bad{0};
};

/// B: replies token + 1 until A closes `ab`.
eddy::Task<void> responder(Pair* p, Counts* counts, bench::Completion* c) {
    std::uint64_t n = 0;
    while (std::optional<std::uint64_t> v = co_await p->ab.receive()) {
        ++n;
        try {
            co_await p->ba.send(*v + 1);
        } catch (const eddy::ChannelClosed&) {
            break;
        }
    }
    counts->messages.fetch_add(n, std::memory_order_relaxed);
    c->done_one();
}

/// A: sends, awaits the reply, checks it; closes `ab` at the end so that B finishes.
eddy::Task<void> initiator(Pair* p, std::uint64_t rounds, Counts* counts, bench::Completion* c) {
    std::uint64_t v = 0, n = 0;
    for (std::uint64_t i = 0; i < rounds; ++i) {
        co_await p->ab.send(v);
        ++n;
        const std::optional<std::uint64_t> r = co_await p->ba.receive();
        if (r != v + 1) {
            counts->bad.fetch_add(1, std::memory_order_relaxed);
            break;
        }
        v = *r + 1;
    }
    if (v != 2 * rounds) counts->bad.fetch_add(1, std::memory_order_relaxed);
    p->ab.close();
    counts->messages.fetch_add(n, std::memory_order_relaxed);
    c->done_one();
}

eddy::Task<double> driver(std::uint64_t pairs, std::uint64_t rounds, Counts* counts, bench::Completion* c) {
    const auto start = bench::Clock::now();
    std::vector<std::unique_ptr<Pair>> all;  // outlives the tasks: freed after `done`
    all.reserve(pairs);
    for (std::uint64_t i = 0; i < pairs; ++i) {
        Pair* p = all.emplace_back(std::make_unique<Pair>()).get();
        eddy::spawn(responder(p, counts, c));
        eddy::spawn(initiator(p, rounds, counts, c));
    }
    co_await c->done;
    co_return bench::seconds_since(start);
}

}  // namespace

int main(int argc, char** argv) {
    bench::Args args(argc, argv, "ping_pong", {{"pairs", 1000}, {"rounds", 1000}});
    const std::uint64_t pairs = args.get("pairs"), rounds = args.get("rounds");
    eddy::Runtime rt(args.config());
    Counts counts;
    bench::Completion done(2 * pairs);
    const double secs = pairs == 0 ? 0.0 : rt.block_on(driver(pairs, rounds, &counts, &done));
    const std::uint64_t expected = 2 * pairs * rounds;
    if (counts.messages.load() != expected || counts.bad.load() != 0)
        bench::fail("ping_pong", "messages=" + std::to_string(counts.messages.load()) + ", expected " +
                                     std::to_string(expected) + ", bad pairs=" + std::to_string(counts.bad.load()));
    bench::report("ping_pong", rt.workers(), expected, secs);
}
