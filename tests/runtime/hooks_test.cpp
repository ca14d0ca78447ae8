// tests/runtime/hooks_test.cpp: RuntimeConfig's task and poll hooks (each called as often as
// the tasks were spawned, first polled, polled and completed, with their names, on 1 and 2
// workers), the poll-time histogram (one entry per poll), and RuntimeMetrics::to_prometheus
// (a small checker of the text format: line grammar, HELP and TYPE before every family, no
// duplicate series, cumulative buckets that end at _count), and the reactor's I/O latency per
// kind (exactly one read counted per read that went through the ring).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <eddy/eddy.hpp>

#include "support/waiting.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::RuntimeMetrics;
using eddy::Task;
using eddy::TaskInfo;
using eddy::WorkerMetrics;
using eddy::test::kDeadline;
using eddy::test::past;

namespace {

/// What the hooks saw; they run on several threads.
struct Seen {
    std::mutex m;
    std::map<std::uint64_t, std::string> spawned;  // id -> name
    std::map<std::uint64_t, std::string> first_polled;
    std::map<std::uint64_t, std::string> completed;
    int duplicate_first_polls = 0;
    std::atomic<std::uint64_t> poll_starts{0};
    std::atomic<std::uint64_t> poll_ends{0};
    std::atomic<int> bad_worker{0};

    static void note(std::mutex& m, std::map<std::uint64_t, std::string>& into, const TaskInfo& t, int* dup) {
        std::lock_guard lock(m);
        if (!into.emplace(t.id, std::string(t.name)).second && dup != nullptr) ++*dup;
    }
};

RuntimeConfig hooked(Seen& seen, std::size_t workers) {
    RuntimeConfig c{.workers = workers};
    c.on_task_spawn = [&seen](const TaskInfo& t) { Seen::note(seen.m, seen.spawned, t, nullptr); };
    c.on_task_first_poll = [&seen](const TaskInfo& t) {
        Seen::note(seen.m, seen.first_polled, t, &seen.duplicate_first_polls);
    };
    c.on_task_complete = [&seen](const TaskInfo& t) { Seen::note(seen.m, seen.completed, t, nullptr); };
    c.on_poll_start = [&seen, workers](std::size_t w) {
        if (w >= workers) seen.bad_worker.fetch_add(1);
        seen.poll_starts.fetch_add(1);
    };
    c.on_poll_end = [&seen](std::size_t) { seen.poll_ends.fetch_add(1); };
    c.poll_time_histogram = true;
    return c;
}

Task<int> child(int i) {
    co_await eddy::yield_now();  // suspends: a second and a third poll
    co_await eddy::yield_now();
    co_return i;
}

constexpr int kChildren = 50;

Task<int> parent() {
    std::vector<eddy::JoinHandle<int>> hs;  // held to the end: the ids stay unique
    for (int i = 0; i < kChildren; ++i) {
        if (i % 2 == 0) {
            hs.push_back(eddy::spawn(child(i), "child-" + std::to_string(i)));
        } else {
            hs.push_back(eddy::spawn(child(i)));
        }
    }
    int sum = 0;
    for (auto& h : hs) sum += co_await std::move(h);
    co_return sum;
}

/// Waits until every poll that started has ended and `tasks` completions were seen.
void settle(Seen& seen, std::size_t tasks) {
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    for (;;) {
        {
            std::lock_guard lock(seen.m);
            if (seen.completed.size() >= tasks && seen.poll_ends.load() == seen.poll_starts.load()) return;
        }
        if (past(deadline)) return;
        std::this_thread::yield();
    }
}

void run_hooked(std::size_t workers) {
    Seen seen;
    std::uint64_t polled = 0;
    std::uint64_t timed = 0;
    {
        Runtime rt(hooked(seen, workers));
        CHECK(rt.block_on(parent()) == kChildren * (kChildren - 1) / 2);
        settle(seen, kChildren + 1);
        const RuntimeMetrics m = rt.metrics();
        polled = m.total(&WorkerMetrics::tasks_polled);
        for (const WorkerMetrics& w : m.workers) timed += w.poll_time.count();
    }
    std::lock_guard lock(seen.m);
    CHECK(seen.spawned.size() == kChildren + 1);  // the children and block_on's task
    CHECK(seen.first_polled == seen.spawned);     // same ids, same names
    CHECK(seen.completed == seen.spawned);
    CHECK(seen.duplicate_first_polls == 0);
    int named = 0;
    for (const auto& [id, name] : seen.spawned) {
        CHECK(id != 0);
        if (!name.empty()) {
            ++named;
            CHECK(name.rfind("child-", 0) == 0);
        }
    }
    CHECK(named == kChildren / 2);
    CHECK(seen.bad_worker.load() == 0);
    CHECK(seen.poll_starts.load() == seen.poll_ends.load());
    CHECK(seen.poll_starts.load() == polled);
    CHECK(polled >= 3 * kChildren);  // each child: the first poll and two after its yields
    CHECK(timed == polled);
}

}  // namespace

TEST_CASE("hooks see every spawn, first poll, poll and completion: one worker") { run_hooked(1); }

TEST_CASE("hooks see every spawn, first poll, poll and completion: two workers") { run_hooked(2); }

TEST_CASE("a task spawned from outside gets its hooks; without the timer the poll histogram is empty") {
    std::atomic<int> first{0};
    std::atomic<int> first_named{0};
    std::atomic<int> done{0};
    RuntimeConfig c{.workers = 1};
    c.on_task_first_poll = [&](const TaskInfo& t) {
        first.fetch_add(1);
        if (t.name == "inside") first_named.fetch_add(1);
    };
    c.on_task_complete = [&done](const TaskInfo&) { done.fetch_add(1); };
    Runtime rt(c);
    eddy::JoinHandle<int> outside = rt.spawn(child(7));  // the global queue's path
    const int sum = rt.block_on([](eddy::JoinHandle<int> h) -> Task<int> {
        const int a = co_await std::move(h);
        const int b = co_await eddy::spawn(child(1), "inside");
        co_return a + b;
    }(std::move(outside)));
    CHECK(sum == 8);
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (done.load() < 3 && !past(deadline)) std::this_thread::yield();
    CHECK(first.load() == 3);  // outside, block_on's task, inside
    CHECK(first_named.load() == 1);
    CHECK(done.load() == 3);
    for (const WorkerMetrics& w : rt.metrics().workers) CHECK(w.poll_time.count() == 0);
}

TEST_CASE("a hook that throws is reported and ignored") {
    RuntimeConfig c{.workers = 1};
    c.on_task_spawn = [](const TaskInfo&) { throw std::runtime_error("hook failed on purpose"); };
    c.on_poll_end = [](std::size_t) { throw 42; };
    Runtime rt(c);
    CHECK(rt.block_on(child(5)) == 5);
}

TEST_CASE("EDDY_POLL_TIME_HISTOGRAM switches the poll timer; a bad value is rejected") {
    ::setenv("EDDY_POLL_TIME_HISTOGRAM", "1", 1);
    CHECK(RuntimeConfig::from_env().poll_time_histogram);
    ::setenv("EDDY_POLL_TIME_HISTOGRAM", "maybe", 1);
    CHECK_THROWS_AS(RuntimeConfig::from_env(), std::invalid_argument);
    ::unsetenv("EDDY_POLL_TIME_HISTOGRAM");
    CHECK_FALSE(RuntimeConfig::from_env().poll_time_histogram);
}

// ---- Prometheus text format -------------------------------------------------------------

namespace {

bool is_name(const std::string& s) {
    if (s.empty()) return false;
    for (std::size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        const bool ok =
            (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' || (i > 0 && c >= '0' && c <= '9');
        if (!ok) return false;
    }
    return true;
}

/// Checks `text` against the exposition format 0.0.4 (what eddy writes of it); returns the
/// samples by series ("name{labels}") for further checks. Fails the test on a violation.
std::map<std::string, double> check_exposition(const std::string& text) {
    std::map<std::string, double> series;
    std::map<std::string, std::string> type_of;  // family -> type
    std::set<std::string> helped;
    std::map<std::string, std::vector<std::pair<std::string, double>>> buckets;  // name{other labels} -> (le, n)
    REQUIRE(!text.empty());
    REQUIRE(text.back() == '\n');
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        INFO(line);
        REQUIRE(!line.empty());
        if (line[0] == '#') {
            std::istringstream l(line);
            std::string hash, kind, name;
            l >> hash >> kind >> name;
            REQUIRE(is_name(name));
            if (kind == "HELP") {
                CHECK(helped.insert(name).second);
            } else {
                REQUIRE(kind == "TYPE");
                std::string type;
                l >> type;
                CHECK((type == "counter" || type == "gauge" || type == "histogram"));
                CHECK(helped.count(name) == 1);  // HELP first
                CHECK(type_of.emplace(name, type).second);
            }
            continue;
        }
        const std::size_t sp = line.rfind(' ');
        REQUIRE(sp != std::string::npos);
        const std::string key = line.substr(0, sp);
        const std::size_t brace = key.find('{');
        const std::string name = key.substr(0, brace);
        std::string labels = brace == std::string::npos ? "" : key.substr(brace);
        REQUIRE(is_name(name));
        if (!labels.empty()) {
            REQUIRE(labels.back() == '}');
            // label="value" pairs, comma separated, values without raw quotes or newlines
            const std::string body = labels.substr(1, labels.size() - 2);
            std::size_t i = 0;
            while (i < body.size()) {
                const std::size_t eq = body.find("=\"", i);
                REQUIRE(eq != std::string::npos);
                REQUIRE(is_name(body.substr(i, eq - i)));
                std::size_t j = eq + 2;
                while (j < body.size() && body[j] != '"') j += body[j] == '\\' ? 2 : 1;
                REQUIRE(j < body.size());
                i = j + 1;
                if (i < body.size()) {
                    REQUIRE(body[i] == ',');
                    ++i;
                }
            }
        }
        const std::string value = line.substr(sp + 1);
        double v = 0;
        if (value == "+Inf") {
            v = 1e308;
        } else {
            std::size_t used = 0;
            v = std::stod(value, &used);
            CHECK(used == value.size());
        }
        CHECK(series.emplace(key, v).second);  // no duplicate series
        // The family: the name itself, or a histogram's / counter's with its suffix.
        std::string family = name;
        for (const char* suffix : {"_bucket", "_sum", "_count", "_total"}) {
            const std::string s(suffix);
            if (type_of.count(family) == 0 && name.size() > s.size() && name.ends_with(s))
                family = name.substr(0, name.size() - s.size());
        }
        REQUIRE(type_of.count(family) == 1);  // TYPE (and so HELP) before its samples
        if (type_of[family] == "counter") CHECK(name.ends_with("_total"));
        if (name.ends_with("_bucket")) {
            const std::size_t le = labels.find("le=\"");
            REQUIRE(le != std::string::npos);
            const std::size_t end = labels.find('"', le + 4);
            std::string rest = labels.substr(0, le) + labels.substr(end + 1);
            buckets[family + rest].emplace_back(labels.substr(le + 4, end - le - 4), v);
        }
    }
    for (const auto& entry : buckets) {
        const std::string& key = entry.first;  // not a structured binding: INFO captures it
        const auto& bs = entry.second;
        INFO(key);
        REQUIRE(!bs.empty());
        CHECK(bs.back().first == "+Inf");
        for (std::size_t i = 1; i < bs.size(); ++i) {
            CHECK(bs[i].second >= bs[i - 1].second);  // cumulative
            if (bs[i].first != "+Inf") CHECK(std::stod(bs[i].first) > std::stod(bs[i - 1].first));
        }
        // +Inf equals _count: the same labels without le (a trailing comma or "{}" dropped)
        std::string count_key = key;
        const std::size_t brace = count_key.find('{');
        std::string name = count_key.substr(0, brace) + "_count";
        std::string labels = brace == std::string::npos ? "" : count_key.substr(brace);
        if (labels == "{}") labels.clear();
        if (labels.size() > 2 && labels[labels.size() - 2] == ',') labels.erase(labels.size() - 2, 1);
        REQUIRE(series.count(name + labels) == 1);
        CHECK(series[name + labels] == bs.back().second);
    }
    return series;
}

}  // namespace

TEST_CASE("to_prometheus writes a valid exposition whose figures match the snapshot") {
    Seen seen;
    Runtime rt(hooked(seen, 2));
    CHECK(rt.block_on(parent()) > 0);
    settle(seen, kChildren + 1);
    const RuntimeMetrics m = rt.metrics();
    const std::string text = m.to_prometheus();
    const auto series = check_exposition(text);
    CHECK(series.at("eddy_tasks_spawned_total") == static_cast<double>(m.tasks_spawned));
    CHECK(series.at("eddy_workers") == 2);
    CHECK(series.at("eddy_worker_polls_total{worker=\"1\"}") == static_cast<double>(m.workers[1].tasks_polled));
    CHECK(series.at("eddy_worker_poll_time_seconds_count{worker=\"0\"}") ==
          static_cast<double>(m.workers[0].poll_time.count()));
    CHECK(series.count("eddy_reactor_operations_total") == 1);
    CHECK(text.find("# TYPE eddy_worker_scheduling_delay_seconds histogram\n") != std::string::npos);
    // another prefix; a bad one is rejected
    CHECK(m.to_prometheus("svc:rt").rfind("# HELP svc:rt_workers ", 0) == 0);
    CHECK_THROWS_AS((void)m.to_prometheus("9lives"), std::invalid_argument);
    CHECK_THROWS_AS((void)m.to_prometheus(""), std::invalid_argument);
    CHECK_THROWS_AS((void)m.to_prometheus("a-b"), std::invalid_argument);
}

TEST_CASE("the histograms' buckets run by powers of two from 4.1 us to 137 s, as the operating guide says") {
    // The guide's range is checked against the exposition itself: each finite `le` is one
    // nanosecond under a power of two, 2^12 ns (4.096 us) to 2^37 ns (137.4 s), 26 of them.
    Runtime rt(RuntimeConfig{.workers = 1});
    const std::string text = rt.metrics().to_prometheus();
    const std::string head = "eddy_worker_scheduling_delay_seconds_bucket{worker=\"0\",le=\"";
    std::vector<std::string> bounds;
    for (std::size_t at = 0; (at = text.find(head, at)) != std::string::npos; at += head.size())
        bounds.push_back(text.substr(at + head.size(), text.find('"', at + head.size()) - at - head.size()));
    REQUIRE(bounds.size() == 27);
    CHECK(bounds.back() == "+Inf");
    for (std::size_t i = 0; i + 1 < bounds.size(); ++i) {
        CAPTURE(i);
        const auto ns = static_cast<std::uint64_t>(std::llround(std::stod(bounds[i]) * 1e9));
        CHECK(ns + 1 == std::uint64_t{1} << (12 + i));
    }
    CHECK(bounds.front() == "0.000004095");
    CHECK(bounds[25] == "137.438953471");
}

namespace {

/// Reads one byte `n` times from `fd`, an empty pipe that the test writes to only once the
/// read is in the reactor: each read goes to the ring (none finds data on its first try).
Task<std::size_t> read_bytes(int fd, int n) {
    std::size_t got = 0;
    std::byte b[1];
    for (int i = 0; i < n; ++i) got += co_await eddy::io::read(fd, b);
    co_return got;
}

}  // namespace

TEST_CASE("reactor reads are timed: N pipe reads through the ring add exactly N to the read kind") {
    constexpr int kReads = 20;
    RuntimeConfig config{.workers = 1};
    config.io_latency_histogram = true;
    Runtime rt(config);
    eddy::io::Pipe p = eddy::io::pipe();
    const RuntimeMetrics before = rt.metrics();
    const std::uint64_t ops0 = before.reactor.operations;
    std::atomic<int> fed{0};
    std::thread feeder([&] {
        const auto deadline = std::chrono::steady_clock::now() + kDeadline;
        for (int i = 1; i <= kReads; ++i) {
            // The i-th read has reached the reactor (counted when taken from its inbox).
            while (rt.metrics().reactor.operations < ops0 + static_cast<std::uint64_t>(i) && !past(deadline))
                std::this_thread::yield();
            const char c = 'x';
            if (::write(p.write_end.get(), &c, 1) == 1) fed.fetch_add(1);
        }
    });
    const std::size_t got = rt.block_on(read_bytes(p.read_end.get(), kReads));
    feeder.join();
    CHECK(fed.load() == kReads);
    CHECK(got == kReads);
    const RuntimeMetrics m = rt.metrics();
    using eddy::IoOpKind;
    CHECK(m.reactor.operations - ops0 == kReads);
    CHECK(m.reactor.latency(IoOpKind::read).count() - before.reactor.latency(IoOpKind::read).count() == kReads);
    CHECK(m.reactor.latency(IoOpKind::write).count() == before.reactor.latency(IoOpKind::write).count());
    CHECK(m.reactor.latency(IoOpKind::read).max() > std::chrono::nanoseconds(0));  // each waited for the feeder
    CHECK(m.to_string().find("io_latency: read n=") != std::string::npos);
    // The exposition: one family, an op label per kind, the read series' count.
    const auto series = check_exposition(m.to_prometheus());
    CHECK(series.at("eddy_reactor_io_latency_seconds_count{op=\"read\"}") ==
          static_cast<double>(m.reactor.latency(IoOpKind::read).count()));
    for (std::size_t k = 0; k < eddy::kIoOpKinds; ++k) {
        const std::string op(eddy::to_string(static_cast<IoOpKind>(k)));
        CHECK(op != "unknown");
        CHECK(series.count("eddy_reactor_io_latency_seconds_count{op=\"" + op + "\"}") == 1);
    }
}

TEST_CASE("without io_latency_histogram reactor reads are not timed; the switch's variable") {
    Runtime rt(RuntimeConfig{.workers = 1});
    eddy::io::Pipe p = eddy::io::pipe();
    const char c = 'x';
    REQUIRE(::write(p.write_end.get(), &c, 1) == 1);
    CHECK(rt.block_on(read_bytes(p.read_end.get(), 1)) == 1);  // found on the worker or through the ring
    for (std::size_t k = 0; k < eddy::kIoOpKinds; ++k) CHECK(rt.metrics().reactor.io_latency[k].count() == 0);
    ::setenv("EDDY_IO_LATENCY_HISTOGRAM", "true", 1);
    CHECK(RuntimeConfig::from_env().io_latency_histogram);
    ::setenv("EDDY_IO_LATENCY_HISTOGRAM", "2", 1);
    CHECK_THROWS_AS(RuntimeConfig::from_env(), std::invalid_argument);
    ::unsetenv("EDDY_IO_LATENCY_HISTOGRAM");
    CHECK_FALSE(RuntimeConfig::from_env().io_latency_histogram);
}

TEST_CASE("the checker itself rejects what Prometheus would") {
    // Sanity of check_exposition's own rules, on a hand-made exposition with a histogram.
    const std::string ok =
        "# HELP x_seconds d\n# TYPE x_seconds histogram\nx_seconds_bucket{le=\"1\"} 1\n"
        "x_seconds_bucket{le=\"+Inf\"} 2\nx_seconds_sum 1.5\nx_seconds_count 2\n";
    CHECK(check_exposition(ok).size() == 4);
}
