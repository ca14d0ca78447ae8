// examples/service.cpp: a small TCP service the way one is run in production: configured from
// the environment, watched through its metrics, stopped by a supervisor's SIGTERM.
//
//     EDDY_WORKERS=2 EDDY_THREAD_NAME=svc SERVICE_PORT=7000 service
//
// Configuration, all from the environment (a bad value: its message on stderr, exit status 2):
//   * the runtime's, through eddy::RuntimeConfig::from_env(): EDDY_WORKERS, EDDY_RING_ENTRIES,
//     EDDY_THREAD_NAME, EDDY_PIN_WORKERS, ... (docs/guide/08-embedding.md, "Configuration");
//   * SERVICE_HOST (IPv4 or IPv6 address, default 127.0.0.1), SERVICE_PORT (0..65535, default
//     0: a free port), SERVICE_IDLE_TIMEOUT_MS (1..86400000, default 30000: a connection that
//     sends nothing for that long is closed).
// Protocol, one line in, one line out (a trailing '\r' is ignored):
//     PING  -> PONG
//     STATS -> one line of the runtime's metrics
//     other -> the line upper-cased
// A connection whose first line is an HTTP request, "GET /metrics HTTP/1.1" (a Prometheus
// scraper, `curl http://127.0.0.1:7000/metrics`), gets one HTTP response instead: the metrics
// in the text exposition format (RuntimeMetrics::to_prometheus), then the connection closes.
// The same port serves both: the first line tells them apart, and a scraper needs no second
// port to be configured and opened.
// Signals: SIGUSR1 prints rt.metrics().to_string() on stdout and the service goes on; SIGUSR2
// prints the live task tree (Runtime::dump(), docs/guide/11-operating.md, "Task dumps")
// between a header line and "service: end of task dump", and the service goes on; SIGINT or
// SIGTERM cancel the TaskGroup that holds the accept loop and every connection, so each
// connection closes, and the service prints one line and the final metrics, and exits 0.
// Output (stdout, each block flushed):
//     service runtime=eddy workers=2 listening=127.0.0.1:7000 idle_timeout_ms=30000
//     service: SIGUSR1, metrics:
//     runtime: workers=2 tasks_spawned=1 ...       (RuntimeMetrics::to_string(): runtime,
//     worker 0: polled=...                          one line per worker, reactor)
//     ...
//     service: SIGTERM, shut down; 3 connections closed
//     service: final metrics:
//     runtime: workers=2 ... tasks_alive=0 ...
#include <eddy/eddy.hpp>
#include <eddy/runtime/task_group.hpp>

#include "support/tcp_server.hpp"

#include <signal.h>

#include <array>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace {

struct Settings {
    std::string host = "127.0.0.1";
    std::uint16_t port = 0;
    std::chrono::milliseconds idle_timeout{30'000};
};

/// The variable `name` as a whole number in [lo, hi]; `fallback` when it is not set.
unsigned long env_number(const char* name, unsigned long lo, unsigned long hi, unsigned long fallback) {
    const char* text = std::getenv(name);
    if (text == nullptr) return fallback;
    const std::string_view s = text;
    unsigned long n = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || n < lo || n > hi)
        throw std::invalid_argument(std::string(name) + "=\"" + text + "\": expected a whole number from " +
                                    std::to_string(lo) + " to " + std::to_string(hi));
    return n;
}

Settings settings_from_env() {
    Settings s;
    if (const char* host = std::getenv("SERVICE_HOST")) s.host = host;
    s.port = static_cast<std::uint16_t>(env_number("SERVICE_PORT", 0, 65535, s.port));
    s.idle_timeout = std::chrono::milliseconds(env_number("SERVICE_IDLE_TIMEOUT_MS", 1, 86'400'000, 30'000));
    return s;
}

/// What the tasks share: the runtime (for its metrics) and what the last line reports.
struct Service {
    eddy::Runtime& rt;
    std::chrono::milliseconds idle_timeout;
    std::atomic<int> signal{0};          // the signal that stopped us
    std::uint64_t accepted = 0;          // connections so far (the accept loop's only)
    std::atomic<std::size_t> open{0};    // connections open now
    std::atomic<std::size_t> closed{0};  // connections the shutdown closed
};

void print_metrics(const Service& service, const char* title) {
    const std::string text = service.rt.metrics().to_string();
    std::printf("service: %s:\n%s", title, text.c_str());  // one call: the block stays whole
    std::fflush(stdout);
}

/// The answer to one request line, with its '\n'.
std::string answer(std::string_view line, const Service& service) {
    if (line == "PING") return "PONG\n";
    if (line == "STATS") {
        const eddy::RuntimeMetrics m = service.rt.metrics();
        const eddy::DurationHistogram delay = m.scheduling_delay();  // wake-up to poll
        const auto us = [](std::chrono::nanoseconds d) { return static_cast<long long>(d.count() / 1000); };
        char out[320];
        std::snprintf(out, sizeof out,
                      "workers=%zu tasks_spawned=%" PRIu64 " tasks_alive=%" PRIu64 " polled=%" PRIu64 " steals=%" PRIu64
                      " io_operations=%" PRIu64
                      " sched_delay_p50_us=%lld sched_delay_p99_us=%lld"
                      " sched_delay_max_us=%lld connections=%zu\n",
                      m.workers.size(), m.tasks_spawned, m.tasks_alive, m.total(&eddy::WorkerMetrics::tasks_polled),
                      m.total(&eddy::WorkerMetrics::steals), m.reactor.operations, us(delay.percentile(0.5)),
                      us(delay.percentile(0.99)), us(delay.max()), service.open.load());
        return out;
    }
    std::string upper(line);
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return upper + "\n";
}

/// The HTTP response to `GET <path>`: the metrics in Prometheus' text format for /metrics
/// (a scraper's request), 404 otherwise. HTTP/1.0 semantics: the connection closes after it.
std::string http_response(std::string_view path, const Service& service) {
    std::string status = "200 OK";
    std::string body;
    if (path == "/metrics") {
        body = service.rt.metrics().to_prometheus();
    } else {
        status = "404 Not Found";
        body = "not found; try /metrics\n";
    }
    return "HTTP/1.0 " + status + "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

eddy::Task<void> serve(eddy::net::TcpStream s, Service& service) {
    service.open.fetch_add(1, std::memory_order_relaxed);
    struct Closing {  // however the connection ends (an error goes to the group's handler)
        Service& service;
        ~Closing() { service.open.fetch_sub(1, std::memory_order_relaxed); }
    } closing{service};
    try {
        std::array<std::byte, 4096> buf;
        std::string pending;  // bytes received after the last '\n'
        bool first_line = true;
        std::optional<std::string> http_path;  // the connection began with "GET <path> HTTP/..."
        bool done = false;
        while (!done) {
            const std::size_t n = co_await eddy::with_timeout(s.read(buf), service.idle_timeout);
            if (n == 0) break;  // the peer closed its side
            pending.append(reinterpret_cast<const char*>(buf.data()), n);
            std::string replies;
            std::size_t start = 0;
            for (std::size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
                std::string_view line(pending.data() + start, nl - start);
                if (line.ends_with('\r')) line.remove_suffix(1);
                if (first_line && line.starts_with("GET ")) {  // a scraper: headers follow
                    const std::string_view rest = line.substr(4);
                    http_path = std::string(rest.substr(0, rest.find(' ')));
                } else if (http_path) {
                    if (line.empty()) {  // the end of the request's headers
                        replies = http_response(*http_path, service);
                        done = true;
                        break;
                    }
                } else {
                    replies += answer(line, service);
                }
                first_line = false;
            }
            pending.erase(0, start);
            if (pending.size() > 64 * 1024) {  // no line is that long: not our protocol
                co_await s.write_all("ERROR line too long\n");
                break;
            }
            if (!replies.empty()) co_await s.write_all(replies);
        }
    } catch (const eddy::OperationCancelled&) {
        // The group was cancelled (shutdown): `s` closes as this frame goes.
        service.closed.fetch_add(1, std::memory_order_relaxed);
    } catch (const eddy::TimedOut&) {
        // Idle for too long: closed like a peer that went away.
    }
}

/// Accepts until the group is cancelled (as examples/echo_server.cpp does).
eddy::Task<void> accept_loop(eddy::net::TcpListener& listener, eddy::TaskGroup& group, Service& service) {
    while (!group.cancelled()) {
        bool failed = false;
        try {
            group.spawn(serve(co_await listener.accept(), service), "conn " + std::to_string(++service.accepted));
        } catch (const eddy::OperationCancelled&) {
            co_return;  // shutdown
        } catch (const std::system_error& e) {
            std::fprintf(stderr, "service: accept: %s\n", e.what());
            failed = true;
        }
        if (failed) {  // e.g. EMFILE: back off instead of spinning (no co_await in a catch)
            try {
                co_await eddy::sleep(std::chrono::milliseconds(10));
            } catch (const eddy::OperationCancelled&) {
                co_return;
            }
        }
    }
}

/// SIGUSR1: print the metrics and go on. SIGINT, SIGTERM: cancel the whole group.
eddy::Task<void> handle_signals(eddy::io::SignalSet& signals, eddy::TaskGroup& group, Service& service) {
    for (;;) {
        int sig = 0;
        try {
            sig = co_await signals.wait();
        } catch (const eddy::OperationCancelled&) {
            co_return;  // the group stopped for another reason
        }
        if (sig == SIGUSR1) {
            print_metrics(service, "SIGUSR1, metrics");
            continue;
        }
        if (sig == SIGUSR2) {
            // From this task: it stays suspended in the dump, which shows it there.
            const eddy::TaskDump dump = co_await eddy::dump_tasks();
            std::printf("service: SIGUSR2, task dump:\n%sservice: end of task dump\n", dump.to_text().c_str());
            std::fflush(stdout);
            continue;
        }
        service.signal.store(sig, std::memory_order_relaxed);
        group.cancel();
        co_return;
    }
}

eddy::Task<void> run(eddy::net::TcpListener listener, eddy::io::SignalSet& signals, Service& service) {
    // Supervising (a child error handler): a failed connection does not cancel the others.
    co_await eddy::task_group(
        [&](eddy::TaskGroup& group) -> eddy::Task<void> {
            group.spawn(handle_signals(signals, group, service), "signals");
            co_await accept_loop(listener, group, service);
        },
        [](std::exception_ptr e) { examples::report_connection_error("service", e); });
    // Every connection has finished here, its socket closed; the listener closes on return.
}

}  // namespace

int main() {
    Settings settings;
    eddy::RuntimeConfig config;
    eddy::net::SocketAddr addr;
    try {
        settings = settings_from_env();
        config = eddy::RuntimeConfig::from_env();
        const bool v6 = settings.host.find(':') != std::string::npos;
        try {
            addr = eddy::net::SocketAddr::parse((v6 ? "[" + settings.host + "]" : settings.host) + ":" +
                                                std::to_string(settings.port));
        } catch (const std::invalid_argument&) {
            throw std::invalid_argument("SERVICE_HOST=\"" + settings.host + "\": expected an IPv4 or IPv6 address");
        }
    } catch (const std::invalid_argument& e) {
        std::fprintf(stderr, "service: %s\n", e.what());
        return 2;
    }

    try {
        // Before the Runtime: its threads inherit the blocked mask, so these signals reach
        // the signalfd instead of ending the process.
        eddy::io::SignalSet signals{SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
        std::optional<eddy::Runtime> rt;
        try {
            rt.emplace(std::move(config));
        } catch (const std::invalid_argument& e) {  // a field out of range
            std::fprintf(stderr, "service: %s\n", e.what());
            return 2;
        }
        Service service{.rt = *rt, .idle_timeout = settings.idle_timeout};
        // Bind before printing: once the line is out, connections are accepted.
        auto listener = eddy::net::TcpListener::bind(addr);
        std::printf("service runtime=eddy workers=%zu listening=%s idle_timeout_ms=%lld\n", rt->workers(),
                    listener.local_address().to_string().c_str(),
                    static_cast<long long>(settings.idle_timeout.count()));
        std::fflush(stdout);  // whoever started us may be waiting for this line on a pipe
        rt->block_on(run(std::move(listener), signals, service));
        rt->shutdown();  // the workers are joined: the final figures are settled
        const int sig = service.signal.load();
        const std::size_t closed = service.closed.load();
        std::printf("service: %s, shut down; %zu connection%s closed\n",
                    sig == SIGINT    ? "SIGINT"
                    : sig == SIGTERM ? "SIGTERM"
                                     : "stopped",
                    closed, closed == 1 ? "" : "s");
        print_metrics(service, "final metrics");
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "service: %s\n", e.what());
        return 1;
    }
}
