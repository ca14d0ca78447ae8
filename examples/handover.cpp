// examples/handover.cpp: a server restarted without refusing a connection: on SIGHUP the
// running generation starts the next one, hands it the listening socket, stops accepting
// once the new one is ready, finishes the connections it has, and exits.
//
//     handover [--host ADDR] [--port N] [--workers N]
//
// Each connection gets one line, "pid=P generation=G", after the client's first line (or
// end of stream), then the server closes it: a client can tell which generation answered.
//
// How the socket travels: the listening socket is one kernel object that both generations
// hold for a moment. Connections the old generation has not accepted wait in its queue,
// which the new generation accepts from; nobody ever closes it, so no connection is refused.
//   1. SIGHUP: generation G forks; the child moves the listener to descriptor 3 (not
//      close-on-exec), sets LISTEN_FDS=1, LISTEN_PID=<its pid> (systemd's protocol:
//      eddy/net/activation.hpp) and a pipe's write end as EDDY_HANDOVER_READY_FD, and execs
//      this program again (/proc/self/exe) with the same arguments;
//   2. generation G+1 takes the socket with net::listen_fds() and TcpListener::from_fd,
//      prints its "handover runtime=eddy ..." line and writes "ready" to the pipe;
//   3. generation G, on "ready", stops accepting (its pending accept is cancelled: nothing
//      accepted is lost), waits for its connections to finish, lets its listener go (a
//      destruction only closes its descriptor; TcpListener::close() would shut the shared
//      socket down for both), prints "handover: generation G handed over to pid P; N
//      connections served" and exits 0. If the new generation dies before it is ready (the
//      pipe ends without "ready"), G says so on stderr and goes on serving.
// Started by systemd (a .socket unit), generation 1 takes its socket the same way. SIGINT or
// SIGTERM shuts a generation down like the other server examples.
#include "support/tcp_server.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

extern char** environ;

namespace {

struct State {
    int generation = 1;
    std::atomic<std::size_t> served{0};
    std::atomic<int> signal{0};       // SIGINT or SIGTERM, if one stopped us
    std::atomic<pid_t> successor{0};  // the generation we handed over to
};

/// One connection: a line in, the answer out, closed.
eddy::Task<void> answer(eddy::net::TcpStream s, State& state) {
    std::array<std::byte, 256> buf;
    for (std::size_t got = 0;;) {  // up to the first '\n', end of stream or 256 bytes
        const std::size_t n = co_await s.read(std::span(buf).subspan(got));
        const auto line = std::span(buf).subspan(got, n);
        got += n;
        if (n == 0 || got == buf.size() || std::find(line.begin(), line.end(), std::byte{'\n'}) != line.end()) break;
    }
    const std::string reply =
        "pid=" + std::to_string(::getpid()) + " generation=" + std::to_string(state.generation) + "\n";
    co_await s.write_all(std::as_bytes(std::span(reply)));
    state.served.fetch_add(1, std::memory_order_relaxed);
}

/// Forks and execs the next generation with `listener` as descriptor 3; returns its pid and
/// the read end of its readiness pipe. Everything the child needs is built before the fork:
/// the child of a threaded process may only call async-signal-safe functions.
std::pair<pid_t, eddy::io::FileDescriptor> start_next(int listener, State& state, char** argv) {
    eddy::io::Pipe ready = eddy::io::pipe();
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e)
        if (std::strncmp(*e, "LISTEN_", 7) != 0 && std::strncmp(*e, "EDDY_HANDOVER_", 14) != 0) env.emplace_back(*e);
    env.push_back("EDDY_HANDOVER_GENERATION=" + std::to_string(state.generation + 1));
    env.push_back("EDDY_HANDOVER_READY_FD=4");
    env.push_back("LISTEN_FDS=1");
    env.push_back("LISTEN_FDNAMES=handover");
    env.push_back("LISTEN_PID=" + std::string(20, '\0'));  // the child writes its pid here
    char* pid_digits = env.back().data() + std::strlen("LISTEN_PID=");
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const int ready_wr = ready.write_end.get();

    const pid_t pid = ::fork();
    if (pid < 0) throw std::system_error(errno, std::system_category(), "handover: fork");
    if (pid == 0) {
        // Above 4 first, so that moving one onto 3 or 4 cannot clobber the other; dup2 then
        // clears close-on-exec on 3 and 4, and the copies above close at exec.
        const int l = ::fcntl(listener, F_DUPFD_CLOEXEC, 10);
        const int r = ::fcntl(ready_wr, F_DUPFD_CLOEXEC, 10);
        if (l < 0 || r < 0 || ::dup2(l, 3) != 3 || ::dup2(r, 4) != 4) ::_exit(127);
        char digits[20];
        int n = 0;
        for (pid_t p = ::getpid(); p > 0; p /= 10) digits[n++] = static_cast<char>('0' + p % 10);
        for (int i = 0; i < n; ++i) pid_digits[i] = digits[n - 1 - i];
        ::execve("/proc/self/exe", argv, envp.data());
        ::_exit(127);
    }
    return {pid, std::move(ready.read_end)};
}

/// True once the next generation wrote "ready"; false if its pipe ended first (it died).
eddy::Task<bool> wait_ready(eddy::io::FileDescriptor pipe) {
    std::array<std::byte, 16> buf;
    std::string got;
    for (std::size_t n; (n = co_await eddy::io::read(pipe.get(), buf)) > 0;) {
        got.append(reinterpret_cast<const char*>(buf.data()), n);
        if (got.find("ready\n") != std::string::npos) co_return true;
    }
    co_return false;
}

/// SIGHUP: hand over (then stop accepting); SIGINT, SIGTERM: shut down.
eddy::Task<void> control(eddy::io::SignalSet& signals, eddy::net::TcpListener& listener, eddy::TaskGroup& group,
                         std::stop_source& accepting, State& state, char** argv) {
    for (;;) {
        int sig = 0;
        try {
            sig = co_await signals.wait();
        } catch (const eddy::OperationCancelled&) {
            co_return;
        }
        if (sig != SIGHUP) {
            state.signal.store(sig, std::memory_order_relaxed);
            group.cancel();
            co_return;
        }
        auto [pid, ready] = start_next(listener.native_handle(), state, argv);
        if (co_await wait_ready(std::move(ready))) {
            state.successor.store(pid, std::memory_order_relaxed);
            accepting.request_stop();  // the accept loop ends; the group waits for the connections
            co_return;
        }
        std::fprintf(stderr, "handover: generation %d: pid %d exited before it was ready; still serving\n",
                     state.generation + 1, static_cast<int>(pid));
    }
}

eddy::Task<void> accept_loop(eddy::net::TcpListener& listener, eddy::TaskGroup& group, std::stop_token stop,
                             State& state) {
    while (!stop.stop_requested()) {
        try {
            group.spawn(answer(co_await listener.accept(stop), state));
        } catch (const eddy::OperationCancelled&) {
            co_return;  // handed over, or shut down
        } catch (const std::system_error& e) {
            std::fprintf(stderr, "handover: accept: %s\n", e.what());
        }
    }
}

eddy::Task<void> serve(eddy::net::TcpListener& listener, eddy::io::SignalSet& signals, State& state, char** argv) {
    std::stop_source accepting;
    co_await eddy::task_group(
        [&](eddy::TaskGroup& group) -> eddy::Task<void> {
            group.spawn(control(signals, listener, group, accepting, state, argv));
            co_await accept_loop(listener, group, accepting.get_token(), state);
        },
        [](std::exception_ptr e) { examples::report_connection_error("handover", e); });
}

}  // namespace

int main(int argc, char** argv) {
    const examples::ServerOptions options =
        examples::parse_server_options("handover", "a server handing its socket over on SIGHUP", argc, argv);
    State state;
    try {
        // Before any thread: listen_fds() edits the environment.
        std::vector<eddy::net::ListenFd> fds = eddy::net::listen_fds();
        int ready_fd = -1;
        if (const char* g = std::getenv("EDDY_HANDOVER_GENERATION"))
            state.generation = static_cast<int>(examples::parse_number(g, 1, 1000000).value_or(1));
        if (const char* r = std::getenv("EDDY_HANDOVER_READY_FD"))
            ready_fd = static_cast<int>(examples::parse_number(r, 0, 1 << 20).value_or(0));
        ::unsetenv("EDDY_HANDOVER_READY_FD");
        eddy::io::SignalSet signals{SIGINT, SIGTERM, SIGHUP};
        eddy::RuntimeConfig config = eddy::RuntimeConfig::from_env();
        if (options.workers) config.workers = options.workers;
        eddy::Runtime rt(std::move(config));
        std::optional<eddy::net::TcpListener> listener;
        if (fds.empty()) {
            const bool v6 = options.host.find(':') != std::string::npos;
            listener.emplace(eddy::net::TcpListener::bind(eddy::net::SocketAddr::parse(
                (v6 ? "[" + options.host + "]" : options.host) + ":" + std::to_string(options.port))));
        } else {
            listener.emplace(eddy::net::TcpListener::from_fd(std::move(fds[0].fd)));
        }
        std::printf("handover runtime=eddy workers=%zu listening=%s generation=%d pid=%d socket=%s\n", rt.workers(),
                    listener->local_address().to_string().c_str(), state.generation, static_cast<int>(::getpid()),
                    fds.empty() ? "bound" : ("passed:" + fds[0].name).c_str());
        std::fflush(stdout);
        if (ready_fd > 0) {
            if (::write(ready_fd, "ready\n", 6) != 6) std::perror("handover: ready");
            ::close(ready_fd);
        }
        rt.block_on(serve(*listener, signals, state, argv));
        const std::size_t served = state.served.load();
        if (const pid_t next = state.successor.load(); next != 0) {
            std::printf("handover: generation %d handed over to pid %d; %zu connections served\n", state.generation,
                        static_cast<int>(next), served);
        } else {
            std::printf("handover: %s, shut down; %zu connections served\n",
                        state.signal.load() == SIGINT ? "SIGINT" : "SIGTERM", served);
        }
        std::fflush(stdout);
        return 0;  // the listener goes with main's scope: only this descriptor is closed
    } catch (const std::invalid_argument& e) {
        examples::usage("handover", e.what());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "handover: %s\n", e.what());
        return 1;
    }
}
