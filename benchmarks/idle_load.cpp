// benchmarks/idle_load.cpp: many connections to an echo server, almost all of them idle
// (plain C++ and epoll, no eddy: the same client for every runtime).
//
//     idle_load --port P --pid PID [--conns 10000] [--active 100] [--secs 3] [--size 64]
//
// 1. Reads the server's VmRSS (/proc/PID/status), then opens --conns connections to
//    127.0.0.1:P. Each sends one --size message and reads its echo, so the server holds
//    whatever it keeps per connection after a first request. Reads VmRSS again after the
//    first tenth of them and after the last: the growth over the other nine tenths, per
//    connection, is `rss_per_conn` (bytes; the kernel's socket buffers are not in it). What a
//    server touches once, whatever the number of connections (a thread's first malloc arena,
//    a worker's first 2 MiB huge page of frames), falls in the first tenth: it is in
//    `rss_growth_per_conn`, the growth over all of them from the first reading.
// 2. The first --active connections then run closed-loop round trips (send --size bytes,
//    wait for the whole echo, check it) for --secs seconds while the others stay open and
//    silent. Reports their round trips/s, p50 and p99, and the server's CPU per round trip
//    (utime + stime of /proc/PID/stat over that phase).
//
// Prints one line:
//     bench=idle_conns conns=N active=A ops=.. secs=.. rate=.. p50_us=.. p99_us=..
//     rss_per_conn=.. rss_growth_per_conn=.. cpu_us_per_rt=..
// Raises its soft RLIMIT_NOFILE to the hard limit first, and exits 1 with a message saying
// what is missing when the limit is below --conns + 64; also on a refused connection, an
// end of stream or a wrong echo.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void die(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::fputs("idle_load: FAILED: ", stderr);
    std::vfprintf(stderr, fmt, ap);
    std::fputc('\n', stderr);
    va_end(ap);
    std::exit(1);
}

struct Options {
    int port = 0;
    long pid = 0;
    std::size_t conns = 10000, active = 100, size = 64;
    double secs = 3;
};

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        char* end = nullptr;
        const double v = std::strtod(argv[i + 1], &end);
        if (*end != '\0' || v < 0) die("%s: not a number: %s", flag.c_str(), argv[i + 1]);
        if (flag == "--port") o.port = static_cast<int>(v);
        else if (flag == "--pid") o.pid = static_cast<long>(v);
        else if (flag == "--conns") o.conns = static_cast<std::size_t>(v);
        else if (flag == "--active") o.active = static_cast<std::size_t>(v);
        else if (flag == "--size") o.size = static_cast<std::size_t>(v);
        else if (flag == "--secs") o.secs = v;
        else
            die("unknown flag %s (usage: idle_load --port P --pid PID [--conns N] [--active A] [--secs S] [--size B])",
                flag.c_str());
    }
    if (o.port <= 0 || o.port > 65535 || o.pid <= 0 || o.conns == 0 || o.size == 0 || o.active == 0 ||
        o.active > o.conns)
        die("usage: idle_load --port P --pid PID [--conns N] [--active A <= N] [--secs S] [--size B > 0]");
    return o;
}

/// The server's resident set in bytes (VmRSS of /proc/PID/status).
long long rss_bytes(long pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
    die("no VmRSS for pid %ld (is the server running?)", pid);
}

/// The server's CPU time in seconds (utime + stime of /proc/PID/stat).
double cpu_seconds(long pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::size_t close = stat.rfind(')');
    if (close == std::string::npos) die("cannot read /proc/%ld/stat", pid);
    std::vector<std::string> fields;
    std::size_t at = close + 2;
    while (at < stat.size()) {
        const std::size_t sp = stat.find(' ', at);
        fields.push_back(stat.substr(at, sp - at));
        if (sp == std::string::npos) break;
        at = sp + 1;
    }
    // Fields from the state on: utime is the 14th field of the line, the 12th here.
    return static_cast<double>(std::atoll(fields.at(11).c_str()) + std::atoll(fields.at(12).c_str())) /
           static_cast<double>(sysconf(_SC_CLK_TCK));
}

void raise_fd_limit(std::size_t need) {
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0) die("getrlimit: %s", std::strerror(errno));
    lim.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0) die("setrlimit: %s", std::strerror(errno));
    if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < need)
        die("%zu connections need %zu descriptors; the hard RLIMIT_NOFILE is %llu (raise it: ulimit -Hn, or "
            "LimitNOFILE= for a service)",
            need - 64, need, static_cast<unsigned long long>(lim.rlim_cur));
}

void send_all(int fd, const char* p, std::size_t n) {
    while (n > 0) {
        const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) die("send: %s", w < 0 ? std::strerror(errno) : "nothing sent");
        p += w;
        n -= static_cast<std::size_t>(w);
    }
}

void recv_exact(int fd, char* p, std::size_t n) {
    while (n > 0) {
        const ssize_t r = ::recv(fd, p, n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) die("recv: %s", r < 0 ? std::strerror(errno) : "the server closed the connection");
        p += r;
        n -= static_cast<std::size_t>(r);
    }
}

int open_connection(int port, const std::string& message) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket: %s", std::strerror(errno));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect: %s", std::strerror(errno));
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // One round trip, so that the server has read from this connection once.
    std::string back(message.size(), '\0');
    send_all(fd, message.data(), message.size());
    recv_exact(fd, back.data(), back.size());
    if (back != message) die("a wrong echo on connection setup");
    return fd;
}

struct Active {
    int fd;
    std::size_t got = 0;
    Clock::time_point sent;
};

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    raise_fd_limit(o.conns + 64);
    std::string message(o.size, '\0');
    for (std::size_t i = 0; i < o.size; ++i) message[i] = static_cast<char>('a' + i % 26);

    const long long rss_before = rss_bytes(o.pid);
    std::vector<int> fds;
    fds.reserve(o.conns);
    const std::size_t warm = std::max<std::size_t>(o.conns / 10, 1);
    long long rss_warm = rss_before;
    for (std::size_t i = 0; i < o.conns; ++i) {
        fds.push_back(open_connection(o.port, message));
        if (i + 1 == warm) rss_warm = rss_bytes(o.pid);
    }
    const long long rss_after = rss_bytes(o.pid);

    const int ep = ::epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1: %s", std::strerror(errno));
    std::vector<Active> act(o.active);
    for (std::size_t i = 0; i < o.active; ++i) {
        act[i].fd = fds[i];
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u64 = i;
        if (::epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) != 0) die("epoll_ctl: %s", std::strerror(errno));
    }
    std::vector<double> latencies_us;
    latencies_us.reserve(1 << 20);
    std::vector<char> buf(o.size);
    const double cpu0 = cpu_seconds(o.pid);
    const auto start = Clock::now();
    const auto stop = start + std::chrono::duration<double>(o.secs);
    for (Active& a : act) {
        a.sent = Clock::now();
        send_all(a.fd, message.data(), message.size());
    }
    std::vector<epoll_event> events(o.active);
    while (Clock::now() < stop) {
        const int n = ::epoll_wait(ep, events.data(), static_cast<int>(events.size()), 100);
        if (n < 0 && errno != EINTR) die("epoll_wait: %s", std::strerror(errno));
        for (int e = 0; e < n; ++e) {
            Active& a = act[events[static_cast<std::size_t>(e)].data.u64];
            const ssize_t r = ::recv(a.fd, buf.data(), o.size - a.got, MSG_DONTWAIT);
            if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (r <= 0) die("recv: %s", r < 0 ? std::strerror(errno) : "the server closed an active connection");
            if (std::memcmp(buf.data(), message.data() + a.got, static_cast<std::size_t>(r)) != 0) die("a wrong echo");
            a.got += static_cast<std::size_t>(r);
            if (a.got < o.size) continue;
            const auto now = Clock::now();
            latencies_us.push_back(std::chrono::duration<double, std::micro>(now - a.sent).count());
            a.got = 0;
            a.sent = now;
            send_all(a.fd, message.data(), message.size());
        }
    }
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    const double cpu1 = cpu_seconds(o.pid);
    if (latencies_us.empty()) die("no round trip completed in %.1f s", secs);
    std::sort(latencies_us.begin(), latencies_us.end());
    const auto pct = [&](double p) {
        return latencies_us[std::min(latencies_us.size() - 1, static_cast<std::size_t>(p * latencies_us.size()))];
    };
    const std::size_t ops = latencies_us.size();
    std::printf(
        "bench=idle_conns conns=%zu active=%zu ops=%zu secs=%.4f rate=%.0f p50_us=%.1f p99_us=%.1f "
        "rss_per_conn=%.0f rss_growth_per_conn=%.0f cpu_us_per_rt=%.2f\n",
        o.conns, o.active, ops, secs, static_cast<double>(ops) / secs, pct(0.50), pct(0.99),
        o.conns > warm ? static_cast<double>(rss_after - rss_warm) / static_cast<double>(o.conns - warm) : 0.0,
        static_cast<double>(rss_after - rss_before) / static_cast<double>(o.conns),
        (cpu1 - cpu0) * 1e6 / static_cast<double>(ops));
    for (int fd : fds) ::close(fd);
    return 0;
}
