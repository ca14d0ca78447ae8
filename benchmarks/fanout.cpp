// benchmarks/fanout.cpp: R rounds; each runs C child tasks concurrently that return their
// index and awaits them all with when_all over a vector; the sum is checked
// (shared/bench/SPEC.md).
#include "bench_main.hpp"

#include <vector>

namespace {

eddy::Task<std::uint64_t> child(std::uint64_t i) { co_return i; }

eddy::Task<double> driver(std::uint64_t rounds, std::uint64_t children, std::uint64_t* joined) {
    const std::uint64_t expected = children * (children == 0 ? 0 : children - 1) / 2;
    const auto start = bench::Clock::now();
    for (std::uint64_t r = 0; r < rounds; ++r) {
        std::vector<eddy::Task<std::uint64_t>> tasks;
        tasks.reserve(children);
        for (std::uint64_t i = 0; i < children; ++i) tasks.push_back(child(i));
        const std::vector<std::uint64_t> results = co_await eddy::when_all(std::move(tasks));
        std::uint64_t sum = 0;
        for (std::uint64_t v : results) sum += v;
        if (sum != expected) bench::fail("fanout", "round " + std::to_string(r) + " sum=" + std::to_string(sum));
        *joined += results.size();
    }
    co_return bench::seconds_since(start);
}

}  // namespace

int main(int argc, char** argv) {
    bench::Args args(argc, argv, "fanout", {{"rounds", 1000}, {"children", 1000}});
    const std::uint64_t rounds = args.get("rounds"), children = args.get("children");
    eddy::Runtime rt(args.config());
    std::uint64_t joined = 0;
    const double secs = rt.block_on(driver(rounds, children, &joined));
    if (joined != rounds * children) bench::fail("fanout", "joined=" + std::to_string(joined));
    bench::report("fanout", rt.workers(), rounds * children, secs);
}
