// tests/runtime/task_local_test.cpp: task_local<T>: who sees a binding (awaited tasks,
// when_all / when_any / with_timeout / TaskGroup children, shield, coop::unconstrained) and
// who does not (spawned tasks, JoinSet), nesting, many keys, cancellation through a binding,
// and get() on an unbound key.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <eddy/eddy.hpp>

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::task_local;
using namespace std::chrono_literals;

namespace {

task_local<std::string> request_id;
task_local<int> depth;

Task<std::string> read_id() {
    const std::string* id = co_await request_id.try_get();
    co_return id != nullptr ? *id : std::string("<none>");
}

Task<std::string> nested_read(int levels) {
    if (levels == 0) co_return co_await read_id();
    co_return co_await nested_read(levels - 1);
}

Task<std::string> read_after_yield() {
    co_await eddy::yield_now();  // may resume on another worker: the binding goes along
    co_return co_await request_id.get();
}

}  // namespace

TEST_CASE("a binding is seen by the task and everything it awaits, and only inside the scope") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto [outside, inside, deep, after] =
        rt.block_on([]() -> Task<std::tuple<std::string, std::string, std::string, std::string>> {
            std::string outside_id = co_await read_id();
            std::string inside_id = co_await request_id.scope("req-1", read_id());
            std::string deep_id = co_await request_id.scope("req-2", nested_read(100));
            std::string after_id = co_await read_id();
            co_return std::tuple{outside_id, inside_id, deep_id, after_id};
        }());
    CHECK(outside == "<none>");
    CHECK(inside == "req-1");
    CHECK(deep == "req-2");
    CHECK(after == "<none>");
}

TEST_CASE("when_all, when_any, with_timeout and TaskGroup children inherit the binding; spawned tasks do not") {
    Runtime rt(RuntimeConfig{.workers = 2});
    std::vector<std::string> seen = rt.block_on(request_id.scope("r", []() -> Task<std::vector<std::string>> {
        std::vector<std::string> ids;
        auto [a, b] = co_await eddy::when_all(read_after_yield(), read_id());
        ids.push_back(a);
        ids.push_back(b);
        std::vector<Task<std::string>> many;
        for (int i = 0; i < 20; ++i) many.push_back(read_after_yield());
        for (std::string& s : co_await eddy::when_all(std::move(many))) CHECK(s == "r");
        auto any = co_await eddy::when_any(read_id(), read_after_yield());
        ids.push_back(std::visit([](const std::string& s) { return s; }, any));
        ids.push_back(co_await eddy::with_timeout(read_after_yield(), 10s));
        ids.push_back(co_await eddy::shield(read_id()));
        ids.push_back(co_await eddy::coop::unconstrained(read_id()));
        std::string in_group;
        co_await eddy::task_group([&in_group](eddy::TaskGroup& g) -> Task<void> {
            g.spawn([](std::string& out) -> Task<void> { out = co_await read_after_yield(); }(in_group));
            co_return;
        });
        ids.push_back(in_group);
        ids.push_back(co_await eddy::spawn(read_id()));  // a spawned task starts unbound
        eddy::JoinSet<std::string> set;
        set.spawn(read_id());
        ids.push_back(*co_await set.join_next());
        co_return ids;
    }()));
    CHECK(seen == std::vector<std::string>{"r", "r", "r", "r", "r", "r", "r", "<none>", "<none>"});
}

TEST_CASE("a nested scope of the same key hides the outer value below it only; keys are independent") {
    Runtime rt(RuntimeConfig{.workers = 1});
    rt.block_on(request_id.scope("outer", []() -> Task<void> {
        CHECK(co_await request_id.get() == "outer");
        co_await request_id.scope("inner", []() -> Task<void> {
            CHECK(co_await request_id.get() == "inner");
            co_await depth.scope(2, []() -> Task<void> {
                CHECK(co_await depth.get() == 2);
                CHECK(co_await request_id.get() == "inner");
            }());
            CHECK(co_await depth.try_get() == nullptr);
        }());
        CHECK(co_await request_id.get() == "outer");
    }()));
}

TEST_CASE("more keys than the inline table holds") {
    std::vector<std::unique_ptr<task_local<int>>> keys;
    for (int i = 0; i < 20; ++i) keys.push_back(std::make_unique<task_local<int>>());
    Runtime rt(RuntimeConfig{.workers = 1});
    int sum = rt.block_on([](std::vector<std::unique_ptr<task_local<int>>>& locals) -> Task<int> {
        // Bind every key, one scope inside the other, then read them all at the bottom.
        struct Bind {
            static Task<int> at(std::vector<std::unique_ptr<task_local<int>>>& locals, std::size_t i) {
                if (i == locals.size()) {
                    int s = 0;
                    for (auto& k : locals) s += co_await k->get();
                    co_return s;
                }
                co_return co_await locals[i]->scope(static_cast<int>(i), at(locals, i + 1));
            }
        };
        co_return co_await Bind::at(locals, 0);
    }(keys));
    CHECK(sum == 190);
}

TEST_CASE("a binding keeps the awaiter's cancellation: a stop reaches the task under it") {
    Runtime rt(RuntimeConfig{.workers = 1});
    std::stop_source stop;
    stop.request_stop();
    CHECK_THROWS_AS(rt.block_on(eddy::with_stop_token(
                        request_id.scope("x", []() -> Task<void> { co_await eddy::sleep(1h); }()), stop.get_token())),
                    eddy::OperationCancelled);
    // And a timeout around a binding still fires.
    CHECK_THROWS_AS(rt.block_on(eddy::with_timeout(
                        request_id.scope("y", []() -> Task<void> { co_await eddy::sleep(1h); }()), 10ms)),
                    eddy::TimedOut);
}

TEST_CASE("misuse: get() on an unbound key throws TaskLocalUnset") {
    Runtime rt(RuntimeConfig{.workers = 1});
    CHECK_THROWS_AS(rt.block_on([]() -> Task<void> { (void)co_await request_id.get(); }()), eddy::TaskLocalUnset);
    CHECK_THROWS_AS(rt.block_on(request_id.scope("z", []() -> Task<void> { (void)co_await depth.get(); }())),
                    eddy::TaskLocalUnset);
}
