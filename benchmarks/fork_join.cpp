// benchmarks/fork_join.cpp: recursive fork-join, two shapes in two styles (not in
// shared/bench/SPEC.md; its result line and protocol).
//
//   --shape fib   binary fib(n) (default n = 30): each call with n >= 2 forks fib(n-1) and
//                 fib(n-2) and adds them; calls with n < 2 are leaves. Checks fib(30) = 832040.
//   --shape tree  an --arity-ary tree of --depth levels (default 10 and 6: 1,000,000 leaves):
//                 each inner node forks its children and sums their leaf counts. Checks the
//                 leaf count.
//   --style when_all  a node awaits eddy::when_all of its children (fib: two tasks; tree: a
//                     vector of ten): structured, the children's counter in the parent's frame.
//   --style spawn     the same recursion with eddy::spawn of each child and co_await of the
//                     JoinHandles, as a Tokio program writes it (benchmarks/tokio-servers'
//                     fork_join).
// Bench names: fork_join_fib, fork_join_tree (when_all), fork_join_fib_spawn,
// fork_join_tree_spawn (spawn). ops = nodes (calls, leaves included). Timed from inside the
// root task, as the other benchmarks.
#include "bench_main.hpp"

#include <string>
#include <vector>

namespace {

eddy::Task<std::uint64_t> fib_when_all(unsigned n) {
    if (n < 2) co_return n;
    auto [a, b] = co_await eddy::when_all(fib_when_all(n - 1), fib_when_all(n - 2));
    co_return a + b;
}

eddy::Task<std::uint64_t> fib_spawn(unsigned n) {
    if (n < 2) co_return n;
    eddy::JoinHandle<std::uint64_t> a = eddy::spawn(fib_spawn(n - 1));
    eddy::JoinHandle<std::uint64_t> b = eddy::spawn(fib_spawn(n - 2));
    const std::uint64_t x = co_await std::move(a);
    co_return x + co_await std::move(b);
}

eddy::Task<std::uint64_t> tree_when_all(unsigned depth, unsigned arity) {
    if (depth == 0) co_return 1;
    std::vector<eddy::Task<std::uint64_t>> children;
    children.reserve(arity);
    for (unsigned i = 0; i < arity; ++i) children.push_back(tree_when_all(depth - 1, arity));
    std::uint64_t leaves = 0;
    for (std::uint64_t v : co_await eddy::when_all(std::move(children))) leaves += v;
    co_return leaves;
}

eddy::Task<std::uint64_t> tree_spawn(unsigned depth, unsigned arity) {
    if (depth == 0) co_return 1;
    std::vector<eddy::JoinHandle<std::uint64_t>> children;
    children.reserve(arity);
    for (unsigned i = 0; i < arity; ++i) children.push_back(eddy::spawn(tree_spawn(depth - 1, arity)));
    std::uint64_t leaves = 0;
    for (auto& h : children) leaves += co_await std::move(h);
    co_return leaves;
}

struct Run {
    std::uint64_t result = 0;
    double secs = 0;
};

eddy::Task<Run> timed(eddy::Task<std::uint64_t> root) {
    const auto start = bench::Clock::now();
    Run r;
    r.result = co_await std::move(root);
    r.secs = bench::seconds_since(start);
    co_return r;
}

/// fib(n) and the number of calls computing it takes (calls(n) = 1 + calls(n-1) + calls(n-2)).
std::pair<std::uint64_t, std::uint64_t> fib_and_calls(unsigned n) {
    std::uint64_t f0 = 0, f1 = 1, c0 = 1, c1 = 1;  // fib(0), fib(1); calls(0), calls(1)
    if (n == 0) return {0, 1};
    for (unsigned i = 2; i <= n; ++i) {
        const std::uint64_t f2 = f0 + f1, c2 = 1 + c0 + c1;
        f0 = f1, f1 = f2, c0 = c1, c1 = c2;
    }
    return {f1, c1};
}

}  // namespace

int main(int argc, char** argv) {
    bench::Args args(argc, argv, "fork_join", {{"n", 30}, {"depth", 6}, {"arity", 10}},
                     {{"shape", {"fib", "tree"}}, {"style", {"when_all", "spawn"}}});
    const bool fib = args.choice("shape") == "fib";
    const bool spawn = args.choice("style") == "spawn";
    const std::string name = std::string("fork_join_") + (fib ? "fib" : "tree") + (spawn ? "_spawn" : "");
    const auto n = static_cast<unsigned>(args.get("n"));
    const auto depth = static_cast<unsigned>(args.get("depth"));
    const auto arity = static_cast<unsigned>(args.get("arity"));
    if (fib && n > 60) bench::fail(name.c_str(), "--n above 60 would run for days");

    std::uint64_t expected = 0, nodes = 0;
    if (fib) {
        std::tie(expected, nodes) = fib_and_calls(n);
    } else {
        expected = 1;
        for (unsigned d = 0; d < depth; ++d) {
            nodes += expected;  // inner nodes of level d
            expected *= arity;
        }
        nodes += expected;  // the leaves
    }
    eddy::Runtime rt(args.config());
    eddy::Task<std::uint64_t> root = fib ? (spawn ? fib_spawn(n) : fib_when_all(n))
                                         : (spawn ? tree_spawn(depth, arity) : tree_when_all(depth, arity));
    const Run r = rt.block_on(timed(std::move(root)));
    if (r.result != expected)
        bench::fail(name.c_str(), "result " + std::to_string(r.result) + ", expected " + std::to_string(expected));
    bench::report(name.c_str(), rt.workers(), nodes, r.secs);
}
