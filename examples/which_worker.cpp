// examples/which_worker.cpp: main_task awaits two concurrent computations and prints which
// worker ran each. With two or more workers they usually run on different ones.
#include <eddy/eddy.hpp>

#include <cstdint>
#include <cstdio>
#include <string>

namespace {

struct Report {
    std::string name;
    std::size_t worker;
    std::uint64_t value;
};

/// Something worth running in parallel: a long sum, long enough to be stolen.
eddy::Task<Report> compute(std::string name, std::uint64_t n) {
    std::uint64_t sum = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
        sum += i;
        if (i % 1'000'000 == 0) co_await eddy::yield_now();  // let others run meanwhile
    }
    co_return Report{std::move(name), eddy::this_worker::index().value_or(0), sum};
}

eddy::Task<void> main_task() {
    auto [a, b] = co_await eddy::when_all(compute("alpha", 40'000'000), compute("beta", 40'000'000));
    for (const Report& r : {a, b})
        std::printf("%s ran on worker %zu (result %llu)\n", r.name.c_str(), r.worker,
                    static_cast<unsigned long long>(r.value));
}

}  // namespace

int main() {
    // One worker per available CPU; from_env() lets the EDDY_* variables override that
    // (EDDY_WORKERS=1 for one worker). A plain `eddy::Runtime rt;` would read none of them.
    eddy::Runtime rt(eddy::RuntimeConfig::from_env());
    std::printf("runtime with %zu workers\n", rt.workers());
    rt.block_on(main_task());
}
