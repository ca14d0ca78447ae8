// examples/support/tcp_server.hpp: what the TCP server examples (echo_server, http_hello,
// kv_server) share, so that each example file shows only its protocol:
//   * the command line: --host ADDR, --port N (EDDY_PORT fills it in when not given; 0 picks
//     a free port), --workers N (EDDY_WORKERS fills it in when not given; else one worker
//     per CPU). The command line beats the environment for both, as an operator expects of a
//     flag: the runtime's settings come from RuntimeConfig::from_env() (so the other EDDY_*
//     tuning variables apply too), then --workers, when given, is set over them;
//   * the server's life: SIGINT/SIGTERM blocked before the Runtime starts (its threads
//     inherit the mask, so the signals reach a signalfd), the listener bound before the
//     "<name> runtime=eddy workers=N listening=ADDR" line is printed, one task per connection
//     in a TaskGroup, and on SIGINT or SIGTERM the whole group cancelled: every connection's
//     pending read or write ends with eddy::OperationCancelled, its socket closes as its task
//     unwinds, and the server prints "<name>: SIGTERM, shut down; N connections closed" and
//     exits 0;
//   * where errors go: the group supervises its children (task_group with a child error
//     handler), so a connection that fails, by any exception, ends that connection only (a
//     reset or a broken pipe silently, anything else on stderr); an accept that fails (EMFILE) is reported and
//     retried after 10 ms, so a lasting error is not a busy loop;
//   * optional hooks (ServerHooks, for chat_server's counters): more signals to catch (each
//     calls on_signal and the server goes on: SIGUSR1 for a stats line) and on_shutdown,
//     called with the Runtime after the shutdown line, before main returns 0.
//
//     int main(int argc, char** argv) {
//         return examples::run_tcp_server("echo_server", "a TCP echo server", argc, argv, echo);
//     }
// where `echo` is a `eddy::Task<void>(eddy::net::TcpStream)` callable.
#pragma once

#include <eddy/eddy.hpp>
#include <eddy/runtime/task_group.hpp>

#include <signal.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace examples {

struct ServerOptions {
    std::string host = "127.0.0.1";
    std::uint16_t port = 7878;
    std::optional<std::size_t> workers;
};

/// What a server adds to the life run_tcp_server gives it; every member may stay empty.
struct ServerHooks {
    std::vector<int> signals;  // caught besides SIGINT and SIGTERM (blocked before the Runtime)
    std::function<void(int, eddy::Runtime&)> on_signal;  // one of `signals` arrived; the server goes on
    std::function<void(eddy::Runtime&)> on_shutdown;     // after the shutdown line, before main returns 0
};

/// Prints why and how to call `name`, then exits: 0 for --help (to stdout), else 2 (stderr).
[[noreturn]] inline void usage(const char* name, const char* why, int status = 2) {
    std::fprintf(status == 0 ? stdout : stderr,
                 "%s: %s\n"
                 "usage: %s [--host ADDR] [--port N] [--workers N]\n"
                 "  --host ADDR   IPv4 or IPv6 address to listen on (default 127.0.0.1)\n"
                 "  --port N      0..65535, 0 picks a free port (default: EDDY_PORT, else 7878)\n"
                 "  --workers N   worker threads (default: EDDY_WORKERS, else one per CPU)\n",
                 name, why, name);
    std::exit(status);
}

/// A whole number in [lo, hi], or nullopt.
inline std::optional<unsigned long> parse_number(std::string_view text, unsigned long lo, unsigned long hi) {
    unsigned long n = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || n < lo || n > hi) return std::nullopt;
    return n;
}

inline ServerOptions parse_server_options(const char* name, const char* description, int argc, char** argv) {
    ServerOptions o;
    bool port_given = false;
    for (int i = 1; i < argc; ++i) {
        const std::string_view flag = argv[i];
        if (flag == "--help" || flag == "-h") usage(name, description, 0);
        if (flag != "--host" && flag != "--port" && flag != "--workers") usage(name, "unknown argument");
        if (i + 1 == argc) usage(name, "a flag is missing its value");
        const std::string_view value = argv[++i];
        if (flag == "--host") {
            o.host = value;
        } else if (flag == "--port") {
            auto port = parse_number(value, 0, 65535);
            if (!port) usage(name, "--port must be a number from 0 to 65535");
            o.port = static_cast<std::uint16_t>(*port);
            port_given = true;
        } else {
            // The upper bound is the runtime's to check (it throws std::invalid_argument).
            auto workers = parse_number(value, 1, std::numeric_limits<unsigned long>::max());
            if (!workers) usage(name, "--workers must be a whole number, at least 1");
            o.workers = *workers;
        }
    }
    // The environment only fills in what the command line left out.
    if (const char* env = std::getenv("EDDY_PORT"); env != nullptr && !port_given) {
        auto port = parse_number(env, 0, 65535);
        if (!port) usage(name, "EDDY_PORT must be a number from 0 to 65535");
        o.port = static_cast<std::uint16_t>(*port);
    }
    return o;
}

/// The handler of a supervising group (task_group with a child error handler), for every
/// server example (and examples/service): a connection's failure is reported and the server
/// goes on. A reset or a broken pipe is routine for a server (the client went away): silent.
inline void report_connection_error(const char* name, std::exception_ptr e) {
    try {
        std::rethrow_exception(e);
    } catch (const std::system_error& x) {
        if (x.code() != std::errc::connection_reset && x.code() != std::errc::broken_pipe)
            std::fprintf(stderr, "%s: connection: %s\n", name, x.what());
    } catch (const std::exception& x) {
        std::fprintf(stderr, "%s: connection: %s\n", name, x.what());
    } catch (...) {
        std::fprintf(stderr, "%s: connection: unknown exception\n", name);
    }
}

namespace detail {

/// What the shutdown line reports.
struct Shutdown {
    std::atomic<int> signal{0};               // the signal that stopped us
    std::atomic<std::size_t> connections{0};  // connections the shutdown closed
};

/// Runs one connection's handler, counting the connections a shutdown closed. Its errors
/// go to the group's handler (report_connection_error) and end this connection only.
template <class Handler>
eddy::Task<void> guard_connection(Handler& handler, eddy::net::TcpStream s, Shutdown& shutdown) {
    try {
        co_await handler(std::move(s));
    } catch (const eddy::OperationCancelled&) {
        // The group was cancelled (shutdown): the socket closed as the handler's frame went.
        shutdown.connections.fetch_add(1, std::memory_order_relaxed);
    }
}

/// Accepts until the group is cancelled, each connection a child of the group.
template <class Handler>
eddy::Task<void> accept_loop(const char* name, eddy::net::TcpListener& listener, eddy::TaskGroup& group,
                             Handler& handler, Shutdown& shutdown) {
    while (!group.cancelled()) {
        bool failed = false;
        try {
            group.spawn(guard_connection(handler, co_await listener.accept(), shutdown));
        } catch (const eddy::OperationCancelled&) {
            co_return;  // shutdown
        } catch (const std::system_error& e) {
            std::fprintf(stderr, "%s: accept: %s\n", name, e.what());
            failed = true;
        }
        // No co_await inside a catch block (C++ forbids it): back off here instead.
        if (failed) {
            try {
                co_await eddy::sleep(std::chrono::milliseconds(10));
            } catch (const eddy::OperationCancelled&) {
                co_return;
            }
        }
    }
}

/// Waits for SIGINT or SIGTERM, then cancels the whole group; any other signal of the set
/// goes to `on_other` (a hook's) and the wait goes on.
inline eddy::Task<void> stop_on_signal(eddy::io::SignalSet& signals, eddy::TaskGroup& group, Shutdown& shutdown,
                                       const std::function<void(int)>& on_other) {
    for (;;) {
        int sig = 0;
        try {
            sig = co_await signals.wait();
        } catch (const eddy::OperationCancelled&) {
            co_return;  // the group stopped for another reason
        }
        if (sig == SIGINT || sig == SIGTERM) {
            shutdown.signal.store(sig, std::memory_order_relaxed);
            break;
        }
        if (on_other) on_other(sig);
    }
    group.cancel();
}

template <class Handler>
eddy::Task<void> serve(const char* name, eddy::net::TcpListener listener, eddy::io::SignalSet& signals,
                       Handler& handler, Shutdown& shutdown, const std::function<void(int)>& on_other) {
    // Supervising: one connection's failure is reported, and the other connections and the
    // accept loop run on.
    co_await eddy::task_group(
        [&](eddy::TaskGroup& group) -> eddy::Task<void> {
            group.spawn(stop_on_signal(signals, group, shutdown, on_other));
            co_await accept_loop(name, listener, group, handler, shutdown);
        },
        [name](std::exception_ptr e) { report_connection_error(name, e); });
    // Every connection has finished here, its socket closed; the listener closes on return.
}

}  // namespace detail

/// The whole life of a TCP server named `name` whose connections `handler` serves (see the
/// top of this file). Returns main's exit status.
template <class Handler>
int run_tcp_server(const char* name, const char* description, int argc, char** argv, Handler handler,
                   const ServerHooks& hooks = {}) {
    const ServerOptions options = parse_server_options(name, description, argc, argv);
    const bool v6 = options.host.find(':') != std::string::npos;
    eddy::net::SocketAddr addr;
    try {
        addr = eddy::net::SocketAddr::parse((v6 ? "[" + options.host + "]" : options.host) + ":" +
                                            std::to_string(options.port));
    } catch (const std::invalid_argument&) {
        usage(name, "--host must be an IPv4 or IPv6 address");
    }
    try {
        // Before the Runtime: its threads inherit the blocked mask.
        std::vector<int> caught{SIGINT, SIGTERM};
        caught.insert(caught.end(), hooks.signals.begin(), hooks.signals.end());
        eddy::io::SignalSet signals{std::span<const int>(caught)};
        // The EDDY_* tuning variables apply (RuntimeConfig::from_env), as in a service; the
        // command line's --workers, set after, beats EDDY_WORKERS.
        eddy::RuntimeConfig config = eddy::RuntimeConfig::from_env();
        if (options.workers) config.workers = options.workers;
        eddy::Runtime rt(std::move(config));
        std::function<void(int)> on_other;
        if (hooks.on_signal) on_other = [&](int sig) { hooks.on_signal(sig, rt); };
        // Bind before printing: once the line is out, connections are accepted.
        auto listener = eddy::net::TcpListener::bind(addr);
        std::printf("%s runtime=eddy workers=%zu listening=%s\n", name, rt.workers(),
                    listener.local_address().to_string().c_str());
        std::fflush(stdout);  // whoever started us may be waiting for this line on a pipe
        detail::Shutdown shutdown;
        rt.block_on(detail::serve(name, std::move(listener), signals, handler, shutdown, on_other));
        const int sig = shutdown.signal.load();
        const std::size_t closed = shutdown.connections.load();
        std::printf("%s: %s, shut down; %zu connection%s closed\n", name,
                    sig == SIGINT    ? "SIGINT"
                    : sig == SIGTERM ? "SIGTERM"
                                     : "stopped",
                    closed, closed == 1 ? "" : "s");
        std::fflush(stdout);
        if (hooks.on_shutdown) hooks.on_shutdown(rt);
        return 0;
    } catch (const std::invalid_argument& e) {
        usage(name, e.what());  // a bad worker count (--workers or EDDY_WORKERS)
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", name, e.what());
        return 1;
    }
}

}  // namespace examples
