// benchmarks/chained_spawn.cpp: a task spawns a child which spawns a child ... depth D, the
// last signals; C chains one after another (shared/bench/SPEC.md).
#include "bench_main.hpp"

namespace {

struct Chain {
    eddy::Event done;
    std::uint64_t reached = 0;  // written before done.set(), read after co_await done
};

eddy::Task<void> chain_step(Chain* chain, std::uint64_t level, std::uint64_t depth) {
    if (level == depth) {
        chain->reached = level;
        chain->done.set();
    } else {
        eddy::spawn(chain_step(chain, level + 1, depth));
    }
    co_return;
}

eddy::Task<double> driver(std::uint64_t chains, std::uint64_t depth, std::uint64_t* total) {
    const auto start = bench::Clock::now();
    for (std::uint64_t i = 0; i < chains; ++i) {
        Chain chain;
        eddy::spawn(chain_step(&chain, 1, depth));
        co_await chain.done;
        if (chain.reached != depth) bench::fail("chained_spawn", "chain reached " + std::to_string(chain.reached));
        *total += chain.reached;
    }
    co_return bench::seconds_since(start);
}

}  // namespace

int main(int argc, char** argv) {
    bench::Args args(argc, argv, "chained_spawn", {{"chains", 1000}, {"depth", 1000}});
    const std::uint64_t chains = args.get("chains"), depth = args.get("depth");
    if (depth == 0) bench::fail("chained_spawn", "--depth must be >= 1");
    eddy::Runtime rt(args.config());
    std::uint64_t total = 0;
    const double secs = rt.block_on(driver(chains, depth, &total));
    if (total != chains * depth) bench::fail("chained_spawn", "spawns=" + std::to_string(total));
    bench::report("chained_spawn", rt.workers(), chains * depth, secs);
}
