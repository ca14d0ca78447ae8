// benchmarks/accept_storm.cpp: accepts per second on a connect storm (eddy only, not in
// shared/bench/SPEC.md; its result line). A server task on eddy accepts in a loop and closes
// each connection (--spawn 1: spawns a task per connection that closes it); --clients plain
// threads with blocking sockets connect to it as fast as they can, --conns connections in
// all. Timed: from the first connect to the last accept; ops = accepts. Also prints
// server_cpu_us_per_accept=: the process's CPU time less the clients' threads', per accept
// (on a shared 2-core machine throughput mostly says who won the CPU; this says what an
// accept costs).
// Each client closes first with SO_LINGER 0 (a reset): no TIME_WAIT on either side, so the
// ephemeral ports never run out; a reset connection still waits in the accept queue and is
// accepted like any other, as long as it reached the queue: so the clients never run more
// than --window connections ahead of the accepts (a full queue drops the handshake's last
// ACK, the reset then kills the half-open connection, and it is lost; `nstat` counts them
// as ListenOverflows). The clients spread over --sources loopback addresses 127.0.0.x
// (x = 1..N) all the same, in case a run leaves many sockets behind.
// The result is checked: exactly --conns accepts, none failed; a run that loses a
// connection fails after --limit seconds instead of hanging.
#include "bench_main.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <thread>

namespace {

struct Counts {
    std::atomic<std::uint64_t> accepted{0};
    std::atomic<std::uint64_t> failed{0};
    std::atomic<std::uint64_t> client_errors{0};
    std::atomic<std::uint64_t> connected{0};
    std::atomic<std::uint64_t> client_cpu_ns{0};
    std::uint64_t window = 0;
};

eddy::Task<void> close_later(eddy::net::TcpStream) { co_return; }  // the stream closes here

eddy::Task<void> accept_loop(eddy::net::TcpListener* listener, std::uint64_t conns, bool spawn, Counts* counts,
                             eddy::Event* done) {
    while (counts->accepted.load(std::memory_order_relaxed) < conns) {
        try {
            eddy::net::TcpStream s = co_await listener->accept();
            if (spawn) eddy::spawn(close_later(std::move(s)));
            counts->accepted.fetch_add(1, std::memory_order_relaxed);
        } catch (const std::system_error&) {
            counts->failed.fetch_add(1, std::memory_order_relaxed);
        }
    }
    done->set();
}

std::uint64_t process_cpu_ns() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    const auto ns = [](const timeval& t) {
        return std::uint64_t(t.tv_sec) * 1000000000u + std::uint64_t(t.tv_usec) * 1000u;
    };
    return ns(u.ru_utime) + ns(u.ru_stime);
}

/// One client thread: `n` connections from 127.0.0.`source`, each reset at once.
void connector(std::uint16_t port, std::uint64_t n, std::uint32_t source, Counts* counts) {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr.s_addr = htonl((127u << 24) | source);
    const linger reset{.l_onoff = 1, .l_linger = 0};
    for (std::uint64_t i = 0; i < n;) {
        while (counts->connected.load(std::memory_order_relaxed) >=
               counts->accepted.load(std::memory_order_relaxed) + counts->window)
            std::this_thread::yield();
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) bench::fail("accept_storm", std::string("socket: ") + std::strerror(errno));
        ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
        const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0 &&
                        ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0;
        ::close(fd);
        if (ok) {
            ++i;
            counts->connected.fetch_add(1, std::memory_order_relaxed);
        } else if (counts->client_errors.fetch_add(1, std::memory_order_relaxed) > 1000) {
            bench::fail("accept_storm", std::string("connect: ") + std::strerror(errno));
        }
    }
    timespec cpu{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
    counts->client_cpu_ns.fetch_add(std::uint64_t(cpu.tv_sec) * 1000000000u + std::uint64_t(cpu.tv_nsec));
}

eddy::Task<double> run(std::uint64_t conns, std::uint64_t clients, std::uint64_t sources, bool spawn, Counts* counts) {
    auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0), 4096);
    const std::uint16_t port = listener.local_address().port();
    eddy::Event done;
    const std::uint64_t cpu_start = process_cpu_ns();
    const auto start = bench::Clock::now();
    eddy::spawn(accept_loop(&listener, conns, spawn, counts, &done));
    std::vector<std::thread> threads;
    for (std::uint64_t c = 0; c < clients; ++c) {
        const std::uint64_t n = conns / clients + (c < conns % clients ? 1 : 0);
        threads.emplace_back(connector, port, n, static_cast<std::uint32_t>(1 + c % sources), counts);
    }
    co_await done;
    const double secs = bench::seconds_since(start);
    for (std::thread& t : threads) t.join();  // done already: every connect returned
    // The server's CPU (the runtime's threads; the loopback's kernel work falls where it falls).
    const std::uint64_t server_ns = process_cpu_ns() - cpu_start - counts->client_cpu_ns.load();
    std::printf("server_cpu_us_per_accept=%.2f\n",
                static_cast<double>(server_ns) / 1000.0 / static_cast<double>(conns));
    co_return secs;
}

}  // namespace

int main(int argc, char** argv) {
    bench::Args args(
        argc, argv, "accept_storm",
        {{"conns", 20000}, {"clients", 4}, {"sources", 4}, {"spawn", 0}, {"window", 1024}, {"limit", 120}});
    const std::uint64_t conns = args.get("conns"), clients = args.get("clients"), sources = args.get("sources");
    if (clients == 0 || sources == 0 || sources > 254) bench::fail("accept_storm", "--clients/--sources out of range");
    const std::uint64_t limit = args.get("limit");
    std::thread([limit] {
        std::this_thread::sleep_for(std::chrono::seconds(limit));
        bench::fail("accept_storm", "not finished after --limit seconds: a connection was lost");
    }).detach();
    eddy::Runtime rt(args.config());
    Counts counts;
    counts.window = args.get("window");
    if (counts.window == 0 || counts.window > 4096)
        bench::fail("accept_storm", "--window must be 1..4096 (the backlog)");
    const double secs = conns == 0 ? 0.0 : rt.block_on(run(conns, clients, sources, args.get("spawn") != 0, &counts));
    if (counts.accepted.load() != conns || counts.failed.load() != 0)
        bench::fail("accept_storm", "accepted=" + std::to_string(counts.accepted.load()) + ", expected " +
                                        std::to_string(conns) + ", failed=" + std::to_string(counts.failed.load()));
    bench::report("accept_storm", rt.workers(), conns, secs);
}
