// examples/echo_server.cpp: a TCP echo server, one task per connection, all in a TaskGroup.
//
//     echo_server [--host ADDR] [--port N] [--workers N]
//
// Shows an accept loop that spawns a task for every connection into a TaskGroup, a
// read/write loop over a 4 KiB buffer, where errors go, and a clean shutdown:
//   * a connection that fails (the client reset it) ends that connection only;
//   * an accept that fails (e.g. EMFILE, out of descriptors) is reported and retried after a
//     short sleep;
//   * SIGINT or SIGTERM cancels the group: the pending accept and every connection's read or
//     write end with eddy::OperationCancelled, each connection's socket closes as its task
//     unwinds, and once all are gone the server prints one line and exits with status 0.
// Listens on 127.0.0.1:7878 unless told otherwise (--port, or EDDY_PORT in the environment;
// port 0 picks a free port). --workers sets the worker threads (EDDY_WORKERS in the
// environment, when set, wins: that is RuntimeConfig's rule). Prints one line once it
// accepts connections, and one when it has shut down:
//     echo_server runtime=eddy workers=2 listening=127.0.0.1:7878
//     echo_server: SIGTERM, shut down; 3 connections closed
#include <eddy/eddy.hpp>
#include <eddy/runtime/task_group.hpp>

#include <signal.h>

#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace {

/// What the shutdown line reports.
struct Shutdown {
    std::atomic<int> signal{0};                 // the signal that stopped us
    std::atomic<std::size_t> connections{0};    // connections the shutdown closed
};

eddy::Task<void> serve(eddy::net::TcpStream s, Shutdown& shutdown) {
    try {
        s.set_nodelay(true);  // echo each chunk at once instead of waiting to coalesce
        std::array<std::byte, 4096> buf;
        for (;;) {
            const std::size_t n = co_await s.read(buf);
            if (n == 0) co_return;  // the peer closed its side
            co_await s.write_all(std::span(buf).first(n));
        }
    } catch (const eddy::OperationCancelled&) {
        // The group was cancelled (shutdown): `s` closes as this frame goes.
        shutdown.connections.fetch_add(1, std::memory_order_relaxed);
    } catch (const std::system_error& e) {
        // This connection ends; the server goes on. A reset is routine for an echo server.
        if (e.code() != std::errc::connection_reset && e.code() != std::errc::broken_pipe)
            std::fprintf(stderr, "echo_server: connection: %s\n", e.what());
    }
}

/// Accepts until the group is cancelled, each connection a child of the group.
eddy::Task<void> accept_loop(eddy::net::TcpListener& listener, eddy::TaskGroup& group, Shutdown& shutdown) {
    while (!group.cancelled()) {
        bool failed = false;
        try {
            group.spawn(serve(co_await listener.accept(), shutdown));
        } catch (const eddy::OperationCancelled&) {
            co_return;  // shutdown
        } catch (const std::system_error& e) {
            std::fprintf(stderr, "echo_server: accept: %s\n", e.what());
            failed = true;
        }
        // No co_await inside a catch block (C++ forbids it): back off here instead, so a
        // lasting error such as EMFILE does not turn the loop into a busy spin.
        if (failed) {
            try {
                co_await eddy::sleep(std::chrono::milliseconds(10));
            } catch (const eddy::OperationCancelled&) {
                co_return;
            }
        }
    }
}

/// Waits for SIGINT or SIGTERM, then cancels the whole group.
eddy::Task<void> stop_on_signal(eddy::io::SignalSet& signals, eddy::TaskGroup& group, Shutdown& shutdown) {
    try {
        shutdown.signal.store(co_await signals.wait(), std::memory_order_relaxed);
    } catch (const eddy::OperationCancelled&) {
        co_return;  // the group stopped for another reason
    }
    group.cancel();
}

eddy::Task<void> run_server(eddy::net::TcpListener listener, eddy::io::SignalSet& signals, Shutdown& shutdown) {
    co_await eddy::task_group([&](eddy::TaskGroup& group) -> eddy::Task<void> {
        group.spawn(stop_on_signal(signals, group, shutdown));
        co_await accept_loop(listener, group, shutdown);
    });
    // Every connection has finished here, its socket closed; the listener closes on return.
}

struct Options {
    std::string host = "127.0.0.1";
    std::uint16_t port = 7878;
    std::optional<std::size_t> workers;
};

/// Prints why and how to call us, then exits: 0 for --help (to stdout), else 2 (to stderr).
[[noreturn]] void usage(const char* why, int status = 2) {
    std::fprintf(status == 0 ? stdout : stderr,
                 "echo_server: %s\n"
                 "usage: echo_server [--host ADDR] [--port N] [--workers N]\n"
                 "  --host ADDR   IPv4 or IPv6 address to listen on (default 127.0.0.1)\n"
                 "  --port N      0..65535, 0 picks a free port (default: EDDY_PORT, else 7878)\n"
                 "  --workers N   worker threads (default one per CPU; EDDY_WORKERS, if set, wins)\n",
                 why);
    std::exit(status);
}

/// A whole number in [lo, hi], or nullopt.
std::optional<unsigned long> parse_number(std::string_view text, unsigned long lo, unsigned long hi) {
    unsigned long n = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || n < lo || n > hi)
        return std::nullopt;
    return n;
}

Options parse_options(int argc, char** argv) {
    Options o;
    bool port_given = false;
    for (int i = 1; i < argc; ++i) {
        const std::string_view flag = argv[i];
        if (flag == "--help" || flag == "-h") usage("a TCP echo server", 0);
        if (flag != "--host" && flag != "--port" && flag != "--workers") usage("unknown argument");
        if (i + 1 == argc) usage("a flag is missing its value");
        const std::string_view value = argv[++i];
        if (flag == "--host") {
            o.host = value;
        } else if (flag == "--port") {
            auto port = parse_number(value, 0, 65535);
            if (!port) usage("--port must be a number from 0 to 65535");
            o.port = static_cast<std::uint16_t>(*port);
            port_given = true;
        } else {
            // The upper bound is the runtime's to check (it throws std::invalid_argument).
            auto workers = parse_number(value, 1, std::numeric_limits<unsigned long>::max());
            if (!workers) usage("--workers must be a whole number, at least 1");
            o.workers = *workers;
        }
    }
    // The environment only fills in what the command line left out.
    if (const char* env = std::getenv("EDDY_PORT"); env != nullptr && !port_given) {
        auto port = parse_number(env, 0, 65535);
        if (!port) usage("EDDY_PORT must be a number from 0 to 65535");
        o.port = static_cast<std::uint16_t>(*port);
    }
    return o;
}

} // namespace

int main(int argc, char** argv) {
    const Options options = parse_options(argc, argv);
    const bool v6 = options.host.find(':') != std::string::npos;
    eddy::net::SocketAddr addr;
    try {
        addr = eddy::net::SocketAddr::parse((v6 ? "[" + options.host + "]" : options.host) + ":" +
                                            std::to_string(options.port));
    } catch (const std::invalid_argument&) {
        usage("--host must be an IPv4 or IPv6 address");
    }

    try {
        // Before the Runtime: its threads inherit the blocked mask, so SIGINT and SIGTERM
        // reach the signalfd instead of ending the process.
        eddy::io::SignalSet signals{SIGINT, SIGTERM};
        eddy::Runtime rt(eddy::RuntimeConfig{.workers = options.workers});
        // Bind before printing: once the line is out, connections are accepted.
        auto listener = eddy::net::TcpListener::bind(addr);
        std::printf("echo_server runtime=eddy workers=%zu listening=%s\n", rt.workers(),
                    listener.local_address().to_string().c_str());
        std::fflush(stdout);  // whoever started us may be waiting for this line on a pipe
        Shutdown shutdown;
        rt.block_on(run_server(std::move(listener), signals, shutdown));
        const int sig = shutdown.signal.load();
        const std::size_t closed = shutdown.connections.load();
        std::printf("echo_server: %s, shut down; %zu connection%s closed\n",
                    sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "stopped", closed, closed == 1 ? "" : "s");
        std::fflush(stdout);
        return 0;
    } catch (const std::invalid_argument& e) {
        usage(e.what());  // a bad worker count (--workers or EDDY_WORKERS)
    } catch (const std::exception& e) {
        std::fprintf(stderr, "echo_server: %s\n", e.what());
        return 1;
    }
}
