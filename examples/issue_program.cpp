// examples/issue_program.cpp: the first program every eddy user writes. Prints 1053.
//
// Shows Task<T> composition, when_all over a pack and over a vector (children run in
// parallel on the workers), spawn/JoinHandle, yield_now, and exceptions crossing co_await.
#include <eddy/eddy.hpp>

#include <cstdio>
#include <stdexcept>
#include <vector>

eddy::Task<int> add(int a, int b) { co_return a + b; }
eddy::Task<int> twice(int x) { co_return co_await add(x, x); }
eddy::Task<void> fail() {
    throw std::runtime_error("boom");
    co_return;
}

eddy::Task<int> main_task() {
    auto [a, b] = co_await eddy::when_all(twice(1), twice(20));  // children run in parallel on the workers
    std::vector<eddy::Task<int>> many;
    for (int i = 0; i < 1000; ++i) many.push_back(twice(i));
    std::vector<int> all = co_await eddy::when_all(std::move(many));
    eddy::JoinHandle<int> h = eddy::spawn(twice(5));  // runs on some worker
    co_await eddy::yield_now();
    int c = co_await std::move(h);
    try {
        co_await fail();
    } catch (const std::runtime_error&) {
        c += 1;
    }
    co_return a + b + c + static_cast<int>(all.size());
}

int main() {
    eddy::Runtime rt(eddy::RuntimeConfig{.workers = 4});
    std::printf("%d\n", rt.block_on(main_task()));  // 2 + 40 + 10 + 1 + 1000 = 1053
}
