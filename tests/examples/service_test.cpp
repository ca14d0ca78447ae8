// tests/examples/service_test.cpp: runs examples/service as a child process and talks to it
// over plain POSIX sockets and poll() (no eddy on this side but <eddy/tasks/dump_config.hpp>,
// which says whether the service's task dump has its waits), as echo_server_test.cpp does.
//
// The binary comes from EDDY_SERVICE (set by tests/meson.build). It is configured through its
// environment only: every EDDY_* and SERVICE_* variable of ours is dropped, the test's own are
// added. It always listens on a free port (SERVICE_PORT unset) and tells us the port on its
// first line. Each test stops it with SIGTERM at the end (SIGKILL after kDeadline); if this
// process dies first, PR_SET_PDEATHSIG kills it. Every wait is bounded by kDeadline and only
// catches a hang: nothing here measures time. The child process and the client are
// tests/support/child_process.hpp and line_client.hpp, shared with echo_server_test.cpp.
#include <doctest/doctest.h>

#include <eddy/tasks/dump_config.hpp>  // EDDY_TASK_DUMP: what the service's dump shows

#include <dirent.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../support/child_process.hpp"
#include "../support/line_client.hpp"

namespace {

using eddy::test::child::Client;
using eddy::test::child::Exit;
using eddy::test::child::run_command;
using eddy::test::child::starts_with;

/// examples/service: its binary is named by EDDY_SERVICE; it gets none of our EDDY_* and
/// SERVICE_* variables.
const eddy::test::child::Program kService{"service", "EDDY_SERVICE", {"EDDY_", "SERVICE_"}};

/// The service, running as a child process. Its stdout is a pipe, its stderr a temporary file.
class Service : public eddy::test::child::ChildProcess {
public:
    /// Starts the service; `env` entries ("NAME=value") are added to ours minus EDDY_* and
    /// SERVICE_*.
    explicit Service(std::vector<std::string> env) : ChildProcess(kService, {}, std::move(env)) {}

    /// Its port, from the first line "service runtime=eddy workers=N listening=ADDR
    /// idle_timeout_ms=T"; `workers` gets N. Skips the whole test (77) if the service cannot
    /// use io_uring here.
    std::uint16_t port(std::size_t* workers = nullptr) {
        return listening_port(read_through_line("service runtime=eddy "), workers);
    }
};

/// Checks that `block` is one whole RuntimeMetrics::to_string() of `workers` workers, after a
/// header line "service: <title>:".
void check_metrics_block(const std::string& block, const std::string& title, std::size_t workers) {
    INFO("metrics block:\n" << block);
    CHECK(block.find("service: " + title + ":\nruntime: workers=" + std::to_string(workers) + " ") !=
          std::string::npos);
    for (std::size_t i = 0; i < workers; ++i)
        CHECK(block.find("\nworker " + std::to_string(i) + ": polled=") != std::string::npos);
    CHECK(block.find("\nworker " + std::to_string(workers) + ":") == std::string::npos);
    CHECK(block.find("\nscheduling_delay: count=") != std::string::npos);
    CHECK(block.find("\nreactor: operations=") != std::string::npos);
    CHECK(block.find("\nblocking: threads=") != std::string::npos);
}


/// The sum over workers of `eddy_<family>{worker="N"} value` lines in an exposition.
std::uint64_t sum_over_workers(const std::string& text, const std::string& family) {
    std::uint64_t sum = 0;
    std::istringstream in(text);
    const std::string start = family + "{worker=\"";
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(start, 0) != 0) continue;
        sum += std::stoull(line.substr(line.rfind(' ') + 1));
    }
    return sum;
}

}  // namespace

TEST_CASE("GET /metrics on the service's port: Prometheus text, scraped with curl") {
    int status = 0;
    (void)run_command("curl --version >/dev/null 2>&1", &status);
    if (status != 0) {
        MESSAGE("curl is not installed (tools/install-deps.sh installs it): test skipped");
        return;
    }
    Service service({"EDDY_WORKERS=2"});
    const std::uint16_t port = service.port();
    const std::string url = "http://127.0.0.1:" + std::to_string(port);
    const std::string curl = "curl -sS --max-time 20 ";
    const std::string first = run_command(curl + url + "/metrics", &status);
    INFO("first scrape:\n" << first);
    REQUIRE(status == 0);
    CHECK(first.find("# TYPE eddy_tasks_spawned_total counter\n") != std::string::npos);
    CHECK(first.find("\neddy_workers 2\n") != std::string::npos);
    CHECK(first.find("\neddy_worker_polls_total{worker=\"1\"} ") != std::string::npos);
    CHECK(first.find("\neddy_worker_scheduling_delay_seconds_bucket{worker=\"0\",le=\"+Inf\"} ") != std::string::npos);
    // Load between the scrapes: requests on a line connection (the same port).
    Client a(port);
    for (int i = 0; i < 20; ++i) CHECK(a.request("PING\n", 1) == "PONG\n");
    const std::string second = run_command(curl + url + "/metrics", &status);
    REQUIRE(status == 0);
    // The service spawns no root task per request (connections are TaskGroup members), so
    // tasks_spawned_total stays; the polls grow (not one per request: a read that finds
    // its bytes ready does not suspend).
    CHECK(sum_over_workers(second, "eddy_worker_polls_total") > sum_over_workers(first, "eddy_worker_polls_total"));
    CHECK(run_command(curl + "-o /dev/null -w '%{http_code}' " + url + "/other", &status) == "404");
    CHECK(a.request("PING\n", 1) == "PONG\n");  // the line protocol goes on beside it

    service.signal(SIGTERM);
    const std::optional<Exit> e = service.wait_exit();
    REQUIRE(e.has_value());
    CHECK(e->status == 0);
}

TEST_CASE("service answers PING, STATS and echoes upper-cased, on several connections") {
    Service service({"EDDY_WORKERS=2"});
    std::size_t workers = 0;
    const std::uint16_t port = service.port(&workers);
    CHECK(workers == 2);

    Client a(port);
    Client b(port);
    CHECK(a.request("PING\n", 1) == "PONG\n");
    CHECK(b.request("hello, world\r\n", 1) == "HELLO, WORLD\n");
    // Several lines in one segment, and a line split across two sends.
    CHECK(a.request("PING\nabc\nping\n", 3) == "PONG\nABC\nPING\n");
    CHECK(b.request("par", 0) == "");
    CHECK(b.request("tial\n", 1) == "PARTIAL\n");
    const std::string stats = a.request("STATS\n", 1);
    INFO("STATS: " << stats);
    CHECK(starts_with(stats, "workers=2 tasks_spawned="));
    CHECK(stats.find(" connections=2\n") != std::string::npos);
    CHECK(stats.find(" sched_delay_p99_us=") != std::string::npos);
    CHECK(std::count(stats.begin(), stats.end(), '\n') == 1);

    service.signal(SIGTERM);
    const std::optional<Exit> e = service.wait_exit();
    REQUIRE(e.has_value());
    CHECK(e->status == 0);
    CHECK(e->err == "");
}

TEST_CASE("SIGUSR1 prints a metrics block and the service keeps serving") {
    Service service({"EDDY_WORKERS=3"});
    const std::uint16_t port = service.port();
    Client c(port);
    CHECK(c.request("PING\n", 1) == "PONG\n");

    for (int round = 0; round < 2; ++round) {
        CAPTURE(round);
        service.signal(SIGUSR1);
        const std::optional<std::string> block = service.read_through_line("blocking: ");
        REQUIRE(block.has_value());
        check_metrics_block(*block, "SIGUSR1, metrics", 3);
        // Still serving: the open connection and a new one.
        CHECK(c.request("still here\n", 1) == "STILL HERE\n");
        Client fresh(port);
        CHECK(fresh.request("PING\n", 1) == "PONG\n");
    }
    CHECK(service.running());
}

TEST_CASE("SIGUSR2 prints the task tree: the group, the named connections in their reads under the idle timeout") {
    Service service({"EDDY_WORKERS=2"});
    const std::uint16_t port = service.port();
    Client a(port);
    Client b(port);
    CHECK(a.request("PING\n", 1) == "PONG\n");
    CHECK(b.request("PING\n", 1) == "PONG\n");
    service.signal(SIGUSR2);
    const std::optional<std::string> dump = service.read_through_line("service: end of task dump");
    REQUIRE(dump.has_value());
    INFO("dump:\n" << *dump);
    CHECK(dump->find("service: SIGUSR2, task dump:\neddy task dump: 2 workers, ") != std::string::npos);
    CHECK(dump->find("[block_on] suspended") != std::string::npos);  // run(), under block_on
#if EDDY_TASK_DUMP  // built with the records: the whole tree, with sites and waits
    CHECK(dump->find("task_group, 4 members") != std::string::npos);  // accept loop's body, signals, 2 connections
    CHECK(dump->find("\"signals\" suspended") != std::string::npos);
    CHECK(dump->find("dumping tasks") != std::string::npos);
    // Suspended in their reads, or runnable if a completion is still on its way to them.
    CHECK(dump->find("\"conn 1\" ") != std::string::npos);
    CHECK(dump->find("\"conn 2\" ") != std::string::npos);
    CHECK(dump->find("with_timeout, ") != std::string::npos);
    CHECK(dump->find("eddy::net::TcpListener::accept fd ") != std::string::npos);
    CHECK(dump->find("eddy::net::TcpStream::read fd ") != std::string::npos);
    CHECK(dump->find("service.cpp:") != std::string::npos);
#endif
    CHECK(a.request("still here\n", 1) == "STILL HERE\n");
    CHECK(service.running());
}

namespace {

/// Opens `open` connections (each served once), then sends `sig`: every client sees end of
/// stream, the service exits 0 with nothing on stderr, and prints its last line and the final
/// metrics (every task finished).
void shutdown_on(int sig, const char* name, std::size_t open) {
    Service service({"EDDY_WORKERS=2"});
    const std::uint16_t port = service.port();
    std::vector<Client> clients;
    for (std::size_t i = 0; i < open; ++i) {
        clients.emplace_back(port);
        CHECK(clients.back().request("PING\n", 1) == "PONG\n");
    }
    service.signal(sig);
    for (std::size_t i = 0; i < open; ++i) {
        CAPTURE(i);
        CHECK(clients[i].sees_end_of_stream());
    }
    const std::optional<Exit> e = service.wait_exit();
    REQUIRE(e.has_value());
    CHECK(e->status == 0);
    CHECK(e->err == "");
    const std::string out = service.rest_of_output();
    INFO("output after the first line:\n" << out);
    const std::string last = std::string("service: ") + name + ", shut down; " + std::to_string(open) +
                             (open == 1 ? " connection closed\n" : " connections closed\n");
    CHECK(starts_with(out, last.c_str()));
    const std::string block = out.substr(std::min(out.size(), last.size()));
    check_metrics_block(block, "final metrics", 2);
    // The workers are joined before the final snapshot: every root task has finished.
    CHECK(block.find(" tasks_alive=0 ") != std::string::npos);
    CHECK(block.find(" in_flight=0 ") != std::string::npos);
    // header, runtime, scheduling delay, workers, reactor, blocking pool
    CHECK(std::count(block.begin(), block.end(), '\n') == 1 + 1 + 1 + 2 + 1 + 1);
}

}  // namespace

TEST_CASE("SIGTERM with open connections: each closes, final metrics, exit status 0") {
    shutdown_on(SIGTERM, "SIGTERM", 4);
}

TEST_CASE("SIGINT with one connection open, and with none") {
    SUBCASE("one open") { shutdown_on(SIGINT, "SIGINT", 1); }
    SUBCASE("none open") { shutdown_on(SIGTERM, "SIGTERM", 0); }
}

TEST_CASE("SERVICE_IDLE_TIMEOUT_MS closes an idle connection; a busy one stays") {
    Service service({"EDDY_WORKERS=2", "SERVICE_IDLE_TIMEOUT_MS=200"});
    const std::uint16_t port = service.port();
    Client idle(port);
    CHECK(idle.request("PING\n", 1) == "PONG\n");
    CHECK(idle.sees_end_of_stream());  // bounded by kDeadline, far above 200 ms
    Client fresh(port);
    CHECK(fresh.request("PING\n", 1) == "PONG\n");
    CHECK(service.running());
}

TEST_CASE("EDDY_CLOCK=paused: a 30 s idle timeout closes an idle connection in far less real time") {
    // Virtual time (eddy/runtime/time.hpp): with nothing to do but wait for the read, the
    // service's runtime is quiet, and its clock jumps to the 30 s idle deadline at once. (The
    // client sends nothing: from another process, its bytes could come after the jump.)
    Service service({"EDDY_WORKERS=2", "EDDY_CLOCK=paused", "SERVICE_IDLE_TIMEOUT_MS=30000"});
    const std::uint16_t port = service.port();
    const auto start = std::chrono::steady_clock::now();
    Client idle(port);
    CHECK(idle.sees_end_of_stream());  // bounded by kDeadline (20 s), below the 30 s timeout
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
    CHECK(service.running());
}

TEST_CASE("EDDY_THREAD_NAME names the threads in /proc/<pid>/task/*/comm") {
    Service service({"EDDY_WORKERS=2", "EDDY_THREAD_NAME=svc"});
    (void)service.port();  // the threads are up once the line is out
    std::vector<std::string> names;
    const std::string dir = "/proc/" + std::to_string(service.pid()) + "/task";
    DIR* d = ::opendir(dir.c_str());
    REQUIRE(d != nullptr);
    while (const dirent* ent = ::readdir(d)) {
        if (ent->d_name[0] == '.') continue;
        std::ifstream comm(dir + "/" + ent->d_name + "/comm");
        std::string name;
        if (std::getline(comm, name)) names.push_back(name);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    std::string all;
    for (const std::string& n : names) all += n + " ";
    INFO("threads: " << all);
    CHECK(std::count(names.begin(), names.end(), "svc-worker-0") == 1);
    CHECK(std::count(names.begin(), names.end(), "svc-worker-1") == 1);
    CHECK(std::count(names.begin(), names.end(), "svc-reactor") == 1);
    CHECK(std::count(names.begin(), names.end(), "eddy-worker-0") == 0);
}

TEST_CASE("a bad setting: a message naming the variable, exit status 2") {
    struct Case {
        const char* setting;
        const char* variable;
    };
    const Case cases[] = {
        {"EDDY_WORKERS=abc", "EDDY_WORKERS"},
        {"EDDY_WORKERS=0", "EDDY_WORKERS"},
        {"EDDY_RING_ENTRIES=0", "EDDY_RING_ENTRIES"},
        {"EDDY_PIN_WORKERS=maybe", "EDDY_PIN_WORKERS"},
        {"EDDY_THREAD_NAME=", "EDDY_THREAD_NAME"},
        {"SERVICE_PORT=abc", "SERVICE_PORT"},
        {"SERVICE_PORT=65536", "SERVICE_PORT"},
        {"SERVICE_PORT=-1", "SERVICE_PORT"},
        {"SERVICE_IDLE_TIMEOUT_MS=0", "SERVICE_IDLE_TIMEOUT_MS"},
        {"SERVICE_IDLE_TIMEOUT_MS=1s", "SERVICE_IDLE_TIMEOUT_MS"},
        {"SERVICE_HOST=localhost", "SERVICE_HOST"},
    };
    for (const Case& c : cases) {
        CAPTURE(c.setting);
        Service service({c.setting});
        const std::optional<Exit> e = service.wait_exit();
        REQUIRE(e.has_value());
        CHECK(e->status == 2);
        CHECK(starts_with(e->err, "service: "));
        CHECK(e->err.find(c.variable) != std::string::npos);
        CHECK(service.rest_of_output() == "");  // it never started listening
    }
}
