// examples/support/tcp_server.hpp: what the TCP server examples (echo_server, http_hello,
// kv_server, chat_server) share, so that each example file shows only its protocol:
//   * the command line: --host ADDR, --port N (EDDY_PORT fills it in when not given; 0 picks
//     a free port), --drain-timeout MS (0 to 3600000, see below), --workers N (EDDY_WORKERS
//     fills it in when not given; else one worker per CPU). The command line beats the
//     environment for both, as an operator expects of a flag: the runtime's settings come
//     from RuntimeConfig::from_env() (so the other EDDY_* tuning variables apply too), then
//     --workers, when given, is set over them;
//   * the server's life: SIGINT/SIGTERM blocked before the Runtime starts (its threads
//     inherit the mask, so the signals reach a signalfd), the listener bound before the
//     "<name> runtime=eddy workers=N listening=ADDR" line is printed, one task per connection
//     in an eddy::TaskTracker. The task owns the connection's socket and lends it to the
//     handler; once the handler has returned, the connection stops counting as open, then
//     the socket closes: a client that has seen the end of its stream is never among the
//     connections the drain line counts;
//   * the drain, on SIGINT or SIGTERM: the listener closes at once (a new connection is
//     refused), "<name>: SIGTERM, draining N connections" is printed, and the Drain every
//     handler may take as its second parameter begins. Such a handler finishes the request it
//     is reading or answering and closes a connection idle between requests (it waits for the
//     next request through examples::next_request, which returns false then); a handler
//     without a Drain (chat_server's: it has no requests) is cancelled at once. Main waits in
//     Runtime::shutdown_gracefully for the connections to end, up to --drain-timeout MS
//     (default 5000); those still open then are cancelled (their pending read or write ends
//     with eddy::OperationCancelled, the socket closes as the task unwinds). Then it prints
//     "<name>: SIGTERM, shut down; N connections closed", with " (M cancelled at the
//     deadline)" when M > 0, and exits 0. Signals that come during the drain are not read
//     (a second SIGTERM changes nothing);
//   * where errors go: each connection's task catches what its handler throws, so a
//     connection that fails, by any exception, ends that connection only (a reset or a broken
//     pipe silently, anything else on stderr); an accept that fails (EMFILE) is reported and
//     retried after 10 ms, so a lasting error is not a busy loop;
//   * optional hooks (ServerHooks, for chat_server's counters): more signals to catch (each
//     calls on_signal and the server goes on: SIGUSR1 for a stats line) and on_shutdown,
//     called with the Runtime after the shutdown line, before main returns 0.
//
//     int main(int argc, char** argv) {
//         return examples::run_tcp_server("echo_server", "a TCP echo server", argc, argv, echo);
//     }
// where `echo` is a `eddy::Task<void>(eddy::net::TcpStream&, const examples::Drain&)` callable
// (or one taking the stream alone, cancelled as the drain begins), whose loop starts with
//         if (!co_await examples::next_request(s, drain)) co_return;  // draining and idle
#pragma once

#include <eddy/eddy.hpp>
#include <eddy/runtime/task_group.hpp>
#include <eddy/runtime/task_tracker.hpp>

#include <poll.h>
#include <signal.h>

#include <algorithm>
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
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace examples {

struct ServerOptions {
    std::string host = "127.0.0.1";
    std::uint16_t port = 7878;
    std::optional<std::size_t> workers;
    std::chrono::milliseconds drain_timeout{5000};
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
                 "usage: %s [--host ADDR] [--port N] [--workers N] [--drain-timeout MS]\n"
                 "  --host ADDR   IPv4 or IPv6 address to listen on (default 127.0.0.1)\n"
                 "  --port N      0..65535, 0 picks a free port (default: EDDY_PORT, else 7878)\n"
                 "  --workers N   worker threads (default: EDDY_WORKERS, else one per CPU)\n"
                 "  --drain-timeout MS  on SIGINT/SIGTERM, how long open connections may take to\n"
                 "                finish before they are cancelled (default 5000; 0: at once)\n",
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
        if (flag != "--host" && flag != "--port" && flag != "--workers" && flag != "--drain-timeout")
            usage(name, "unknown argument");
        if (i + 1 == argc) usage(name, "a flag is missing its value");
        const std::string_view value = argv[++i];
        if (flag == "--host") {
            o.host = value;
        } else if (flag == "--port") {
            auto port = parse_number(value, 0, 65535);
            if (!port) usage(name, "--port must be a number from 0 to 65535");
            o.port = static_cast<std::uint16_t>(*port);
            port_given = true;
        } else if (flag == "--drain-timeout") {
            auto ms = parse_number(value, 0, 3'600'000);
            if (!ms) usage(name, "--drain-timeout must be a number of milliseconds from 0 to 3600000");
            o.drain_timeout = std::chrono::milliseconds(*ms);
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

/// What every server example (and examples/service, as a supervising group's child error
/// handler) does with a connection's failure: report it, and the server goes on. A reset or
/// a broken pipe is routine for a server (the client went away): silent.
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

/// Whether the server is draining (SIGINT or SIGTERM arrived), for a connection handler
/// that takes it as its second parameter: `Task<void>(TcpStream&, const Drain&)`. Such a
/// handler finishes the request it is reading or answering, and closes the connection
/// instead of waiting for another (next_request).
class Drain {
public:
    /// True once the drain has begun.
    bool draining() const noexcept { return source_.stop_requested(); }
    /// Stopped once the drain has begun: cancels a wait for the next request.
    std::stop_token token() const noexcept { return source_.get_token(); }
    /// Begins the drain (run_tcp_server, after it has closed the listener).
    void start() noexcept { source_.request_stop(); }

private:
    std::stop_source source_;
};

/// True when a read of `fd` would not wait: bytes, end of stream or an error are there.
inline bool has_input(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
}

/// Call it where a connection is idle: before reading the next request, when its reader has
/// buffered nothing of one. Waits until bytes (or the end of the stream) arrive on `s`: true,
/// go on and read the request, which the drain will not interrupt. False when the server
/// drains while nothing has arrived: close the connection. Bytes that arrived before the
/// drain began count as a started request. The wait is the socket's own readiness
/// (TcpStream::readable), as a read's would be: no trip through the reactor per request.
inline eddy::Task<bool> next_request(eddy::net::TcpStream& s, const Drain& drain) {
    try {
        co_await s.readable(drain.token());
        co_return true;
    } catch (const eddy::OperationCancelled&) {
        if (!drain.draining()) throw;  // the deadline, not the drain
    }
    co_return has_input(s.native_handle());
}

namespace detail {

/// What the shutdown lines report, and the drain the connections see.
struct Shutdown {
    std::atomic<int> signal{0};        // the signal that stopped us
    std::atomic<std::size_t> open{0};  // connections accepted whose socket is not yet closed
    Drain drain;
};

/// Runs one connection's handler on its socket `s`, counted in `shutdown.open` by the accept
/// loop. A handler that takes a Drain finishes its request and closes; one that does not is
/// cancelled as the drain begins (it has no request to finish). Its errors end this
/// connection only. The count drops before the socket closes (with this frame): the drain
/// line counts no connection whose client has already seen its end.
template <class Handler>
eddy::Task<void> guard_connection(const char* name, Handler& handler, eddy::net::TcpStream s, Shutdown& shutdown) {
    try {
        if constexpr (std::is_invocable_v<Handler&, eddy::net::TcpStream&, const Drain&>)
            co_await handler(s, std::as_const(shutdown.drain));
        else co_await eddy::with_stop_token(handler(s), shutdown.drain.token());
    } catch (const eddy::OperationCancelled&) {
        // The drain (a handler without Drain) or its deadline.
    } catch (...) {
        report_connection_error(name, std::current_exception());
    }
    // Release: pairs with serve()'s acquire load; the close that follows is what the client
    // sees, and what it does next (a signal) comes after.
    shutdown.open.fetch_sub(1, std::memory_order_release);
}

/// Accepts until cancelled (SIGINT or SIGTERM), each connection tracked by `connections`.
template <class Handler>
eddy::Task<void> accept_loop(const char* name, eddy::net::TcpListener& listener, eddy::TaskTracker& connections,
                             Handler& handler, Shutdown& shutdown) {
    for (;;) {
        bool failed = false;
        try {
            eddy::net::TcpStream s = co_await listener.accept();
            // Counted before the task is: the drain line must count it from now on.
            shutdown.open.fetch_add(1, std::memory_order_relaxed);
            try {
                connections.spawn(guard_connection(name, handler, std::move(s), shutdown), "connection");
            } catch (...) {
                shutdown.open.fetch_sub(1, std::memory_order_relaxed);
                throw;
            }
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

/// Waits for SIGINT or SIGTERM, then cancels the group (the accept loop); any other signal
/// of the set goes to `on_other` (a hook's) and the wait goes on.
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

inline const char* signal_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "stopped"; }

/// Accepts until SIGINT or SIGTERM, then closes the listener, prints the draining line and
/// starts the drain; returns the number of connections open then. The connections go on as
/// tracked tasks: main's shutdown_gracefully waits for them.
template <class Handler>
eddy::Task<std::size_t> serve(const char* name, eddy::net::TcpListener listener, eddy::io::SignalSet& signals,
                              Handler& handler, Shutdown& shutdown, const std::function<void(int)>& on_other) {
    eddy::TaskTracker connections;
    co_await eddy::task_group([&](eddy::TaskGroup& group) -> eddy::Task<void> {
        group.spawn(stop_on_signal(signals, group, shutdown, on_other));
        co_await accept_loop(name, listener, connections, handler, shutdown);
    });
    listener.close();  // from here on a new connection is refused (ECONNREFUSED)
    // Acquire: pairs with guard_connection's release decrement.
    const std::size_t open = shutdown.open.load(std::memory_order_acquire);
    std::printf("%s: %s, draining %zu connection%s\n", name, signal_name(shutdown.signal.load()), open,
                open == 1 ? "" : "s");
    std::fflush(stdout);
    shutdown.drain.start();
    co_return open;
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
        const std::size_t closed =
            rt.block_on(detail::serve(name, std::move(listener), signals, handler, shutdown, on_other));
        // The drain: the connections finish (or close when idle); those still open at the
        // deadline are cancelled (TaskTracker members are abortable).
        const eddy::ShutdownReport report = rt.shutdown_gracefully(options.drain_timeout);
        const auto cut = std::count(report.cancelled_names.begin(), report.cancelled_names.end(), "connection");
        std::printf("%s: %s, shut down; %zu connection%s closed", name, detail::signal_name(shutdown.signal.load()),
                    closed, closed == 1 ? "" : "s");
        if (cut > 0) std::printf(" (%zu cancelled at the deadline)", static_cast<std::size_t>(cut));
        std::printf("\n");
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
