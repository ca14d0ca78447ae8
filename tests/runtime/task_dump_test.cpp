// Runtime::dump() and co_await eddy::dump_tasks() on real trees: a TaskGroup of connections
// blocked in reads, a when_any racing a sleep, a cancelled group draining, joins, locks,
// runnable tasks; the text and JSON forms; misuse; dumps racing each other and the workers.
#include <doctest/doctest.h>

#include <eddy/eddy.hpp>

#include "support/io_helpers.hpp"
#include "support/net_helpers.hpp"

#include <atomic>
#include <chrono>
#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#if EDDY_TASK_DUMP  // built with -Dtask_dump=false frames keep no record: see the #else below

using namespace std::chrono_literals;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::TaskDump;

namespace {

const TaskDump::Task* find(const TaskDump::Task& t, const std::function<bool(const TaskDump::Task&)>& pred) {
    if (pred(t)) return &t;
    for (const TaskDump::Task& c : t.children)
        if (const TaskDump::Task* f = find(c, pred)) return f;
    return nullptr;
}
const TaskDump::Task* find(const TaskDump& d, const std::function<bool(const TaskDump::Task&)>& pred) {
    for (const TaskDump::Task& r : d.roots)
        if (const TaskDump::Task* f = find(r, pred)) return f;
    return nullptr;
}
std::size_t count(const TaskDump::Task& t, const std::function<bool(const TaskDump::Task&)>& pred) {
    std::size_t n = pred(t) ? 1 : 0;
    for (const TaskDump::Task& c : t.children) n += count(c, pred);
    return n;
}
std::size_t count(const TaskDump& d, const std::function<bool(const TaskDump::Task&)>& pred) {
    std::size_t n = 0;
    for (const TaskDump::Task& r : d.roots) n += count(r, pred);
    return n;
}
const TaskDump::Task* named(const TaskDump& d, const std::string& name) {
    return find(d, [&](const TaskDump::Task& t) { return t.name == name; });
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// Dumps until `ready` holds (the tasks reach their waits on their own time); at most 10 s.
TaskDump dump_until(Runtime& rt, const std::function<bool(const TaskDump&)>& ready) {
    const auto end = std::chrono::steady_clock::now() + 10s;
    TaskDump d = rt.dump();
    while (!ready(d) && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(5ms);
        d = rt.dump();
    }
    return d;
}

/// Structural JSON check: strings closed, braces and brackets balanced and nested right.
bool balanced_json(const std::string& j) {
    std::string stack;
    bool in_string = false;
    for (std::size_t i = 0; i < j.size(); ++i) {
        const char c = j[i];
        if (in_string) {
            if (c == '\\') {
                ++i;
            } else if (c == '"') {
                in_string = false;
            } else if (static_cast<unsigned char>(c) < 0x20) {
                return false;
            }
            continue;
        }
        if (c == '"') in_string = true;
        if (c == '{' || c == '[') stack.push_back(c);
        if (c == '}' || c == ']') {
            if (stack.empty() || stack.back() != (c == '}' ? '{' : '[')) return false;
            stack.pop_back();
        }
    }
    return !in_string && stack.empty();
}

template <class T>
T join(Runtime& rt, eddy::JoinHandle<T> h) {
    return rt.block_on([](eddy::JoinHandle<T> j) -> Task<T> { co_return co_await std::move(j); }(std::move(h)));
}

Task<void> serve(eddy::net::TcpStream s) {
    std::array<std::byte, 64> buf{};
    while (co_await s.read(buf) != 0) {
    }
}

}  // namespace

TEST_CASE("a TaskGroup of connections blocked in reads: named members, their reads and sites, text and JSON") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
    const auto address = listener.local_address();
    auto server = rt.spawn(eddy::task_group([&](eddy::TaskGroup& g) -> Task<void> {
                               for (int i = 0; i < 3; ++i)
                                   g.spawn(serve(co_await listener.accept()), "conn " + std::to_string(i));
                           }),
                           "server");
    std::vector<eddy::net::TcpStream> clients;
    for (int i = 0; i < 3; ++i)
        clients.push_back(rt.block_on([](eddy::net::SocketAddr a) -> Task<eddy::net::TcpStream> {
            co_return co_await eddy::net::TcpStream::connect(a);
        }(address)));

    const TaskDump d = dump_until(rt, [](const TaskDump& seen) {
        return count(seen, [](const TaskDump::Task& t) { return contains(t.waits_on, "TcpStream::read fd"); }) == 3;
    });
    INFO(d.to_text());
    CHECK(d.workers == 2);
    const TaskDump::Task* root = named(d, "server");
    REQUIRE(root != nullptr);
    CHECK(root->kind == "spawned");
    CHECK(root->state == "suspended");
    const TaskDump::Task* group =
        find(*root, [](const TaskDump::Task& t) { return contains(t.waits_on, "task_group, 3 members"); });
    REQUIRE(group != nullptr);
    REQUIRE(group->children.size() == 3);
    for (int i = 0; i < 3; ++i) {
        const TaskDump::Task& m = group->children[static_cast<std::size_t>(i)];
        CHECK(m.name == "conn " + std::to_string(i));
        CHECK(m.state == "suspended");
        CHECK(contains(m.waits_on, "eddy::net::TcpStream::read fd "));
        CHECK(contains(m.site, "task_dump_test.cpp:"));
        CHECK(m.waited.has_value());
        CHECK_FALSE(m.cancelled);
    }
    const std::string text = d.to_text();
    // The driver is the one the runtime's metrics name (io_uring here, epoll under
    // tools/no-io-uring), in the first line and in the JSON.
    CHECK(d.driver == rt.metrics().reactor.driver);
    CHECK(contains(text, std::string(" tasks (driver ") + std::string(eddy::to_string(d.driver)) + ")\n"));
    CHECK(contains(d.to_json(), std::string("\"driver\":\"") + std::string(eddy::to_string(d.driver)) + "\""));
    CHECK(contains(text, "\"server\" [spawned] suspended"));
    CHECK(contains(text, "\"conn 2\" suspended"));
    CHECK(contains(text, "task_group, 3 members"));
    const std::string json = d.to_json();
    CHECK(balanced_json(json));
    CHECK(contains(json, "\"name\":\"server\""));
    CHECK(contains(json, "\"name\":\"conn 1\""));
    CHECK(contains(json, "\"kind\":\"spawned\""));

    clients.clear();  // each read sees the end of its stream: the members and the group finish
    join(rt, std::move(server));
    const TaskDump after = dump_until(rt, [](const TaskDump& seen) { return seen.roots.empty(); });
    CHECK(after.roots.empty());
    CHECK(after.tasks == 0);
}

TEST_CASE("a when_any racing a sleep: both children, the read's descriptor, the sleep's time left") {
    Runtime rt(RuntimeConfig{.workers = 2});
    eddy::io::Pipe p = eddy::io::pipe();
    eddy::io::DescriptorStream rd(std::move(p.read_end));
    eddy::io::DescriptorStream wr(std::move(p.write_end));
    auto racer = rt.spawn(
        [](eddy::io::DescriptorStream& in) -> Task<std::size_t> {
            auto read_one = [](eddy::io::DescriptorStream& s) -> Task<std::size_t> {
                std::array<std::byte, 16> buf{};
                co_return co_await s.read(buf);
            };
            auto nap = []() -> Task<std::size_t> {
                co_await eddy::sleep(60s);
                co_return 0;
            };
            auto r = co_await eddy::when_any(read_one(in), nap());
            co_return r.index();
        }(rd),
        "racer");
    const TaskDump d = dump_until(rt, [](const TaskDump& seen) {
        return find(seen, [](const TaskDump::Task& t) { return contains(t.waits_on, "ms left"); }) != nullptr &&
               find(seen, [](const TaskDump::Task& t) { return contains(t.waits_on, "read fd"); }) != nullptr;
    });
    INFO(d.to_text());
    const TaskDump::Task* root = named(d, "racer");
    REQUIRE(root != nullptr);
    const TaskDump::Task* race = find(*root, [](const TaskDump::Task& t) { return t.waits_on == "when_any of 2"; });
    REQUIRE(race != nullptr);
    REQUIRE(race->children.size() == 2);
    CHECK(find(race->children[0], [](const TaskDump::Task& t) { return contains(t.waits_on, "read fd "); }) != nullptr);
    const TaskDump::Task* sleeper =
        find(race->children[1], [](const TaskDump::Task& t) { return contains(t.waits_on, "eddy::sleep"); });
    REQUIRE(sleeper != nullptr);
    CHECK(contains(sleeper->waits_on, "ms left"));
    CHECK(contains(sleeper->site, "task_dump_test.cpp:"));

    rt.block_on([](eddy::io::DescriptorStream& out) -> Task<void> {
        co_await eddy::io::write_all(out, eddy::test::bytes("x"));
    }(wr));
    CHECK(join(rt, std::move(racer)) == 0);  // the read won; the sleep was cancelled
}

TEST_CASE("with_timeout around a read: one wait naming the timer and the read") {
    Runtime rt(RuntimeConfig{.workers = 2});
    eddy::io::Pipe p = eddy::io::pipe();
    eddy::io::DescriptorStream rd(std::move(p.read_end));
    eddy::io::DescriptorStream wr(std::move(p.write_end));
    auto timed = rt.spawn(
        [](eddy::io::DescriptorStream& in) -> Task<std::size_t> {
            std::array<std::byte, 16> buf{};
            co_return co_await eddy::with_timeout(in.read(buf), 60s);  // no frame of its own
        }(rd),
        "timed");
    const TaskDump d = dump_until(rt, [](const TaskDump& seen) {
        return find(seen, [](const TaskDump::Task& t) { return contains(t.waits_on, "with_timeout"); }) != nullptr;
    });
    INFO(d.to_text());
    const TaskDump::Task* root = named(d, "timed");
    REQUIRE(root != nullptr);
    CHECK(contains(root->waits_on, "with_timeout, "));
    CHECK(contains(root->waits_on, "ms left: "));
    CHECK(contains(root->waits_on, "read fd "));
    CHECK(root->children.empty());  // the read is the task's own wait, not a child's
    rt.block_on([](eddy::io::DescriptorStream& out) -> Task<void> {
        co_await eddy::io::write_all(out, eddy::test::bytes("x"));
    }(wr));
    CHECK(join(rt, std::move(timed)) == 1);
}

TEST_CASE(
    "a cancelled group draining: the group says cancelling, its members are cancelled, the shielded cleanup is not") {
    Runtime rt(RuntimeConfig{.workers = 2});
    eddy::Event release;
    std::atomic<int> cleaned{0};
    auto group = rt.spawn(eddy::task_group([&](eddy::TaskGroup& g) -> Task<void> {
                              for (int i = 0; i < 2; ++i)
                                  g.spawn(
                                      [](eddy::Event& ev, std::atomic<int>& done) -> Task<void> {
                                          try {
                                              co_await eddy::sleep(60s);
                                          } catch (const eddy::OperationCancelled&) {
                                          }
                                          co_await eddy::shield([](eddy::Event& e) -> Task<void> { co_await e; }(ev));
                                          done.fetch_add(1);
                                      }(release, cleaned),
                                      "worker " + std::to_string(i));
                              co_await eddy::sleep(1ms);
                              g.cancel();
                          }),
                          "draining");
    const TaskDump d = dump_until(rt, [](const TaskDump& seen) {
        return count(seen, [](const TaskDump::Task& t) { return contains(t.waits_on, "Event"); }) == 2;
    });
    INFO(d.to_text());
    const TaskDump::Task* g = find(d, [](const TaskDump::Task& t) { return contains(t.waits_on, "task_group"); });
    REQUIRE(g != nullptr);
    CHECK(contains(g->waits_on, "cancelling"));
    CHECK(g->children.size() == 2);
    for (const TaskDump::Task& m : g->children) {
        CHECK(contains(m.name, "worker "));
        CHECK(m.cancelled);
        const TaskDump::Task* inner = find(m, [](const TaskDump::Task& t) { return contains(t.waits_on, "Event"); });
        REQUIRE(inner != nullptr);
        CHECK_FALSE(inner->cancelled);  // shielded
    }
    CHECK(contains(d.to_text(), "[cancelled]"));
    CHECK(contains(d.to_json(), "\"cancelled\":true"));
    rt.block_on([](eddy::Event& e) -> Task<void> {
        e.set();
        co_return;
    }(release));
    join(rt, std::move(group));
    CHECK(cleaned.load() == 2);
}

TEST_CASE("from a task: the dumping task, a runnable spawn, a join, a lock, a block_on root") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::Mutex mutex;
    eddy::Event go;
    const TaskDump d = rt.block_on([](eddy::Mutex& m, eddy::Event& ev) -> Task<TaskDump> {
        auto guard = co_await m.lock();
        auto locker = eddy::spawn(
            [](eddy::Mutex& mm) -> Task<void> {
                auto g = co_await mm.lock();
                co_return;
            }(m),
            "locker");
        auto joiner = eddy::spawn(
            [](eddy::JoinHandle<void> h) -> Task<void> { co_await std::move(h); }(std::move(locker)), "joiner");
        co_await eddy::yield_now();  // both run up to their waits
        auto waiter = eddy::spawn([](eddy::Event& e) -> Task<void> { co_await e; }(ev), "fresh");
        TaskDump dump = co_await eddy::dump_tasks();  // "fresh" has not run: it is in the LIFO slot
        ev.set();
        guard.unlock();
        co_await std::move(joiner);
        co_await std::move(waiter);
        co_return dump;
    }(mutex, go));
    INFO(d.to_text());
    const TaskDump::Task* self = find(d, [](const TaskDump::Task& t) { return t.waits_on == "dumping tasks"; });
    REQUIRE(self != nullptr);
    CHECK(contains(self->site, "task_dump_test.cpp:"));  // its kind: see the next test
    const TaskDump::Task* locker = named(d, "locker");
    REQUIRE(locker != nullptr);
    CHECK(contains(locker->waits_on, "eddy::Mutex"));
    const TaskDump::Task* joiner = named(d, "joiner");
    REQUIRE(joiner != nullptr);
    CHECK(joiner->waits_on == "join task #" + std::to_string(locker->id));
    const TaskDump::Task* fresh = named(d, "fresh");
    REQUIRE(fresh != nullptr);
    CHECK(fresh->state == "runnable");
    REQUIRE(fresh->worker.has_value());
    CHECK(*fresh->worker == 0);
}

TEST_CASE("a task a thread waits for in block_on is a block_on root (once the thread waits)") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::Event ev;
    TaskDump seen;
    std::thread other([&] {
        // The calling thread marks the task when it starts waiting, after the spawn: dump until then.
        seen = dump_until(rt, [](const TaskDump& d) {
            return find(d, [](const TaskDump::Task& t) {
                       return t.kind == "block_on" && contains(t.waits_on, "Event");
                   }) != nullptr;
        });
        rt.block_on([](eddy::Event& e) -> Task<void> {
            e.set();
            co_return;
        }(ev));
    });
    rt.block_on([](eddy::Event& e) -> Task<void> { co_await e; }(ev));
    other.join();
    INFO(seen.to_text());
    const TaskDump::Task* root = find(seen, [](const TaskDump::Task& t) { return t.kind == "block_on"; });
    REQUIRE(root != nullptr);
    CHECK(contains(root->waits_on, "Event"));
    CHECK(contains(root->site, "task_dump_test.cpp:"));
}

TEST_CASE("a worker running one task that never suspends: the dump gives up on it after its patience and is partial") {
    Runtime rt(RuntimeConfig{.workers = 2});
    std::atomic<bool> spinning{false}, release{false};
    auto spinner = rt.spawn(
        [](std::atomic<bool>& on, std::atomic<bool>& off) -> Task<void> {
            on.store(true);
            while (!off.load()) {
            }  // never suspends
            co_return;
        }(spinning, release),
        "spinner");
    while (!spinning.load()) std::this_thread::sleep_for(1ms);
    // The patience is for every worker: the idle one must also wake and stop within it. A
    // loaded machine can keep that thread off the CPU for 100 ms; then both are busy and the
    // dump says nothing about the spinner alone: dump again (at most 10 times in all).
    TaskDump d = rt.dump(100ms);
    for (int retry = 1; retry < 10 && d.busy_workers.size() > 1; ++retry) d = rt.dump(100ms);
    INFO(d.to_text());
    CHECK_FALSE(d.complete);
    CHECK(d.busy_workers.size() == 1);
    const TaskDump::Task* s = named(d, "spinner");
    REQUIRE(s != nullptr);
    CHECK(s->state == "unknown");
    CHECK(contains(d.to_text(), "partial: worker "));
    CHECK(contains(d.to_json(), "\"complete\":false"));
    CHECK(balanced_json(d.to_json()));
    // The worker that did stop was let go: the runtime still runs tasks.
    CHECK(rt.block_on([]() -> Task<int> { co_return 7; }()) == 7);
    release.store(true);
    join(rt, std::move(spinner));
    const TaskDump after = rt.dump();
    CHECK(after.complete);
    CHECK(after.busy_workers.empty());
}

TEST_CASE("a task spawned from outside waits in the global queue: runnable, on no worker; it runs afterwards") {
    Runtime rt(RuntimeConfig{.workers = 1});
    std::atomic<bool> spawned{false};
    std::optional<eddy::JoinHandle<int>> outside;
    std::thread spawner;
    const TaskDump d = rt.block_on([](Runtime& r, std::atomic<bool>& done, std::optional<eddy::JoinHandle<int>>& h,
                                      std::thread& t) -> Task<TaskDump> {
        t = std::thread([&] {
            h.emplace(r.spawn([]() -> Task<int> { co_return 42; }(), "from outside"));
            done.store(true);
        });
        while (!done.load()) std::this_thread::yield();  // the only worker is here: it stays queued
        co_return co_await eddy::dump_tasks();
    }(rt, spawned, outside, spawner));
    spawner.join();
    INFO(d.to_text());
    const TaskDump::Task* t = named(d, "from outside");
    REQUIRE(t != nullptr);
    CHECK(t->state == "runnable");
    CHECK_FALSE(t->worker.has_value());
    CHECK(join(rt, std::move(*outside)) == 42);  // taken out of the global queue and put back: still runs
}

TEST_CASE("names with quotes, backslashes and newlines stay on one line in the text and valid in JSON") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::Event ev;
    auto h = rt.spawn([](eddy::Event& e) -> Task<void> { co_await e; }(ev), "a \"b\"\\c\nd");
    const TaskDump d = dump_until(rt, [](const TaskDump& seen) {
        return find(seen, [](const TaskDump::Task& t) { return t.state == "suspended"; }) != nullptr;
    });
    const std::string text = d.to_text();
    INFO(text);
    CHECK(contains(text, "\"a \\\"b\\\"\\\\c\\x0ad\""));
    CHECK(std::count(text.begin(), text.end(), '\n') == 2);  // the header and one task
    CHECK(balanced_json(d.to_json()));
    CHECK(contains(d.to_json(), "\"name\":\"a \\\"b\\\"\\\\c\\nd\""));
    rt.block_on([](eddy::Event& e) -> Task<void> {
        e.set();
        co_return;
    }(ev));
    join(rt, std::move(h));
}

TEST_CASE(
    "misuse: Runtime::dump on a worker throws WrongThread, dump_tasks off a worker too, a stopped runtime "
    "RuntimeStopped") {
    Runtime rt(RuntimeConfig{.workers = 1});
    CHECK_THROWS_AS(rt.block_on([](Runtime& r) -> Task<void> {
        (void)r.dump();
        co_return;
    }(rt)),
                    eddy::WrongThread);
    eddy::DumpTasks off_worker = eddy::dump_tasks();
    CHECK_THROWS_AS(off_worker.await_suspend(std::noop_coroutine()), eddy::WrongThread);
}

TEST_CASE("misuse: a dump after shutdown throws RuntimeStopped") {
    Runtime rt(RuntimeConfig{.workers = 1});
    rt.shutdown();
    CHECK_THROWS_AS((void)rt.dump(), eddy::RuntimeStopped);
}

TEST_CASE(
    "dumps from two tasks and another thread at once, while tasks spawn and finish: no deadlock, every dump whole") {
    Runtime rt(RuntimeConfig{.workers = 2});
    std::atomic<bool> stop{false};
    std::atomic<int> outside_dumps{0}, outside_bad{0};
    std::thread outside([&] {  // no doctest assertions off the test's thread: counts instead
        while (!stop.load()) {
            const TaskDump d = rt.dump();
            outside_dumps.fetch_add(1);
            if (!balanced_json(d.to_json()) || d.workers != 2) outside_bad.fetch_add(1);
        }
    });
    auto dumper = [](std::atomic<bool>& s) -> Task<int> {
        int n = 0;
        for (int i = 0; i < 100; ++i) {
            const TaskDump d = co_await eddy::dump_tasks();
            if (d.workers == 2) ++n;
            std::vector<Task<void>> work;
            for (int k = 0; k < 8; ++k) work.push_back([]() -> Task<void> { co_await eddy::yield_now(); }());
            co_await eddy::when_all(std::move(work));
        }
        s.store(true);
        co_return n;
    };
    const auto counts = rt.block_on(eddy::when_all(dumper(stop), dumper(stop)));
    stop.store(true);
    outside.join();
    CHECK(outside_dumps.load() > 0);
    CHECK(outside_bad.load() == 0);
    CHECK(std::get<0>(counts) == 100);
    CHECK(std::get<1>(counts) == 100);
}

#else

TEST_CASE("without the records (-Dtask_dump=false) a dump still lists the named roots and their states") {
    eddy::Runtime rt(eddy::RuntimeConfig{.workers = 1});
    eddy::Event ev;
    auto h = rt.spawn([](eddy::Event& e) -> eddy::Task<void> { co_await e; }(ev), "waiter");
    eddy::TaskDump d = rt.dump();
    REQUIRE(d.roots.size() == 1);
    CHECK(d.roots[0].name == "waiter");
    CHECK(d.roots[0].kind == "spawned");
    CHECK(d.roots[0].waits_on.empty());
    ev.set();
    rt.block_on([](eddy::JoinHandle<void> j) -> eddy::Task<void> { co_await std::move(j); }(std::move(h)));
}

#endif
