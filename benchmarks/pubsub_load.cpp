// benchmarks/pubsub_load.cpp: the load client of the fanout_pubsub benchmark. It drives a chat
// server speaking the protocol of examples/chat_server.cpp (eddy) and of its Tokio twin
// (benchmarks/tokio-servers/src/bin/chat_server.rs), and checks what comes back. Plain C++20
// and POSIX, no eddy: it must not share code, or a bug, with the runtime it measures.
//
//     pubsub_load --port N [--host ADDR] [--clients 200] [--room-size 20] [--window 1]
//                 [--size 64] [--secs 3 | --lines L] [--rate R] [--runtime NAME] [--workers N]
//                 [--timeout-s 60]
//
// Client i (0 <= i < clients) joins room i / room_size ("JOIN <room>"), and once every client
// has its "JOINED" answer they all start sending lines "<i> <seq> <padding>\n" of --size bytes
// (seq counts from 0; the padding is one letter chosen by i and seq). A client keeps at most
// --window of its own lines in flight: sent, not yet seen back (the server sends a line to
// every member of the room, the sender included). It sends --lines lines, or for --secs
// seconds; the run ends once every client has seen its own lines back and every line of
// every sender of its room. With --rate R the clients together send at most R lines a
// second, evenly spread (client i's k-th line no earlier than (k x clients + i) / R seconds
// after the start): an offered load below what the server can take, for figures of a server
// that is not saturated (the scheduling delay); without it they send as fast as the window
// allows.
//
// Checked for every line received: it is well-formed (the numbers, the length, the padding's
// letter at both ends), its sender is in the receiver's room, and it is that sender's next
// line (no gap, no reordering). Each violation counts as an error. A client the server closes
// before the end was dropped (as too slow): it is counted, and its missing lines are not
// waited for; the lines it sent before are still checked at the others.
//
// One epoll thread (level-triggered) serves every connection with large reads: on a 2-core
// machine the client competes with the server for the CPU, so it must cost little.
//
// The defaults (a window of 1, 3 seconds) make a run of about 3 s. The window is 1 because
// Tokio 1.24 already drops clients of a 20-member room at a window of 2 with one worker (a
// sender's window bounds only its own lines in flight, not how far the slowest member of
// its room may fall behind). With 100 members a room's fan-out overflows both runtimes'
// scheduling today (tasks wait long enough for a member to fall 1024 or 4096 lines behind),
// so that row drops clients even at a window of 1: there, read `dropped` first.
//
// Output: one result line in the style of shared/bench/SPEC.md, the SPEC's fields first:
//     bench=fanout_pubsub runtime=eddy workers=2 ops=<lines delivered> secs=<s> rate=<ops/s>
//         room_size=20 clients=200 window=1 size=64 lines_sent=<n> sent_min=<n> sent_max=<n>
//         p50_us=<ack> p99_us=<ack> dropped=<n> errors=<n> offered=<--rate, 0 without>
// (one line). ops counts every line received by every client after the start; secs runs from
// the start to the end of the run; p50_us and p99_us are the time from sending a line to seeing
// it come back; sent_min and sent_max are the fewest and most lines a client that was not
// dropped sent (with --secs, how evenly the server served its clients). Exit status: 0, or 1
// when errors > 0, a connection failed or the run timed out (--timeout-s), 2 on a usage error.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
    std::string host = "127.0.0.1";
    unsigned long port = 0;
    unsigned long clients = 200;
    unsigned long room_size = 20;
    unsigned long window = 1;
    unsigned long size = 64;
    unsigned long lines = 0;  // 0: run for `secs`
    double secs = 3;
    double rate = 0;  // lines a second over all clients; 0: as fast as the window allows
    std::string runtime = "unknown";
    unsigned long workers = 0;
    double timeout_s = 60;
};

[[noreturn]] void usage(const char* why) {
    std::fprintf(stderr,
                 "pubsub_load: %s\n"
                 "usage: pubsub_load --port N [--host ADDR] [--clients 200] [--room-size 20] [--window 1]\n"
                 "                   [--size 64] [--secs 3 | --lines L] [--rate R] [--runtime NAME]\n"
                 "                   [--workers N] [--timeout-s 60]\n",
                 why);
    std::exit(2);
}

bool parse_whole(std::string_view text, unsigned long& out) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return !text.empty() && ec == std::errc{} && end == text.data() + text.size();
}

Options parse_options(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string_view flag = argv[i];
        if (i + 1 == argc) usage("a flag is missing its value");
        const std::string_view value = argv[++i];
        unsigned long n = 0;
        const bool whole = parse_whole(value, n);
        // A whole number in [lo, hi] into `field`.
        const auto number = [&](unsigned long& field, unsigned long lo, unsigned long hi, const char* why) {
            if (!whole || n < lo || n > hi) usage(why);
            field = n;
        };
        if (flag == "--host") {
            o.host = value;
        } else if (flag == "--runtime") {
            o.runtime = value;
        } else if (flag == "--port") {
            number(o.port, 1, 65535, "--port: 1..65535");
        } else if (flag == "--clients") {
            number(o.clients, 1, 100000, "--clients: 1..100000");
        } else if (flag == "--room-size") {
            number(o.room_size, 1, 100000, "--room-size: 1..100000");
        } else if (flag == "--window") {
            number(o.window, 1, 4096, "--window: 1..4096");
        } else if (flag == "--size") {
            number(o.size, 32, 4096, "--size: 32..4096 bytes (the server takes lines up to 4 KiB)");
        } else if (flag == "--lines") {
            number(o.lines, 1, ULONG_MAX, "--lines: at least 1");
        } else if (flag == "--workers") {
            number(o.workers, 0, ULONG_MAX, "--workers: a whole number");
        } else if (flag == "--rate") {
            char* end = nullptr;
            const std::string text(value);
            const double d = std::strtod(text.c_str(), &end);
            if (end == text.c_str() || *end != '\0' || !(d > 0 && d < 1e9)) usage("--rate: lines a second, above 0");
            o.rate = d;
        } else if (flag == "--secs" || flag == "--timeout-s") {
            char* end = nullptr;
            const std::string text(value);
            const double d = std::strtod(text.c_str(), &end);
            if (end == text.c_str() || *end != '\0' || !(d > 0 && d < 1e6))
                usage("--secs, --timeout-s: seconds, above 0");
            (flag == "--secs" ? o.secs : o.timeout_s) = d;
        } else {
            usage("unknown argument");
        }
    }
    if (o.port == 0) usage("--port is required");
    return o;
}

/// The padding letter of sender `id`'s line `seq`.
char padding(std::uint64_t id, std::uint64_t seq) { return static_cast<char>('a' + (id + seq) % 26); }

struct Client {
    int fd = -1;
    std::uint32_t id = 0;
    std::uint32_t room_first = 0;  // the room's first client id
    bool joined = false;
    bool dropped = false;
    bool want_out = false;  // EPOLLOUT is on: `out` waits for room in the socket
    std::uint64_t sent = 0;
    std::uint64_t acked = 0;
    std::vector<std::uint64_t> next;         // per member of the room: its next seq expected
    std::vector<Clock::time_point> sent_at;  // ring of `window`: when each line in flight left
    std::string in;                          // a partial line
    std::string out;                         // bytes the socket did not take yet
};

class Load {
public:
    explicit Load(const Options& o) : o_(o), clients_(o.clients) {}

    int run() {
        raise_nofile();
        epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
        if (epoll_ < 0) return fail("epoll_create1");
        if (!connect_all()) return 1;
        const Clock::time_point give_up = Clock::now() + to_duration(o_.timeout_s);
        while (joined_ < live()) {
            if (!turn(give_up)) return timed_out("joining");
        }
        start_ = Clock::now();
        deadline_ = start_ + to_duration(o_.secs);
        started_ = true;
        for (Client& c : clients_) top_up(c, start_);
        Clock::time_point last_check{};
        for (;;) {
            if (!turn(give_up)) return timed_out("running");
            const Clock::time_point now = Clock::now();
            if (o_.rate > 0)
                for (Client& c : clients_) top_up(c, now);  // lines that came due meanwhile
            if (now - last_check >= std::chrono::milliseconds(5)) {
                last_check = now;
                if (finished(now)) break;
            }
        }
        report(Clock::now());
        return errors_ == 0 ? 0 : 1;
    }

private:
    static Clock::duration to_duration(double s) {
        return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
    }

    static int fail(const char* what) {
        std::fprintf(stderr, "pubsub_load: %s: %s\n", what, std::strerror(errno));
        return 1;
    }

    int timed_out(const char* phase) {
        std::fprintf(stderr, "pubsub_load: timed out after %.0f s while %s\n", o_.timeout_s, phase);
        return 1;
    }

    std::size_t live() const { return clients_.size() - dropped_; }

    static void raise_nofile() {
        rlimit r{};
        if (::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
            r.rlim_cur = r.rlim_max;
            ::setrlimit(RLIMIT_NOFILE, &r);
        }
    }

    bool connect_all() {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<std::uint16_t>(o_.port));
        if (::inet_pton(AF_INET, o_.host.c_str(), &a.sin_addr) != 1) usage("--host must be an IPv4 address");
        for (std::size_t i = 0; i < clients_.size(); ++i) {
            Client& c = clients_[i];
            c.id = static_cast<std::uint32_t>(i);
            c.room_first = static_cast<std::uint32_t>(i / o_.room_size * o_.room_size);
            const std::size_t members = std::min<std::size_t>(o_.room_size, clients_.size() - c.room_first);
            c.next.assign(members, 0);
            c.sent_at.resize(o_.window);
            c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (c.fd < 0) return fail("socket") == 0;
            if (::connect(c.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
                std::fprintf(stderr, "pubsub_load: connect to %s:%lu: %s\n", o_.host.c_str(), o_.port,
                             std::strerror(errno));
                return false;
            }
            const int one = 1;
            ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            ::fcntl(c.fd, F_SETFL, O_NONBLOCK);
            epoll_event ev{};
            ev.events = EPOLLIN;
            ev.data.u32 = c.id;
            if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, c.fd, &ev) != 0) return fail("epoll_ctl") == 0;
            c.out = "JOIN " + std::to_string(c.room_first / o_.room_size) + "\n";
            flush(c);
        }
        return true;
    }

    /// One epoll_wait and the events it gave; false once `give_up` has passed.
    bool turn(Clock::time_point give_up) {
        epoll_event events[256];
        // Paced (--rate), the sends are due between events: look at least every millisecond.
        const int n = ::epoll_wait(epoll_, events, 256, o_.rate > 0 && started_ ? 1 : 5);
        if (n < 0 && errno != EINTR) {
            fail("epoll_wait");
            std::exit(1);
        }
        const Clock::time_point now = Clock::now();
        for (int i = 0; i < n; ++i) {
            Client& c = clients_[events[i].data.u32];
            if (c.dropped) continue;
            if (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) on_readable(c, now);
            if (!c.dropped && (events[i].events & EPOLLOUT)) flush(c);
        }
        return now < give_up;
    }

    void on_readable(Client& c, Clock::time_point now) {
        // A few reads at most: the epoll is level-triggered, so what is left comes back next
        // turn, after the other connections had theirs.
        for (int reads = 0; reads < 4; ++reads) {
            const ssize_t n = ::recv(c.fd, buf_, sizeof buf_, 0);
            if (n > 0) {
                take(c, std::string_view(buf_, static_cast<std::size_t>(n)), now);
                if (c.dropped || static_cast<std::size_t>(n) < sizeof buf_) return;
            } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                drop(c);  // the server closed it (a reset too): dropped as too slow
                return;
            } else {
                return;
            }
        }
    }

    /// The bytes `data` that arrived for `c`: every whole line in it, the rest kept.
    void take(Client& c, std::string_view data, Clock::time_point now) {
        if (!c.in.empty()) {
            const std::size_t nl = data.find('\n');
            if (nl == std::string_view::npos) {
                c.in.append(data);
                return;
            }
            c.in.append(data.substr(0, nl));
            const std::string line = std::move(c.in);
            c.in.clear();
            on_line(c, line, now);
            data.remove_prefix(nl + 1);
        }
        for (std::size_t nl; !c.dropped && (nl = data.find('\n')) != std::string_view::npos;) {
            on_line(c, data.substr(0, nl), now);
            data.remove_prefix(nl + 1);
        }
        if (!c.dropped) c.in.assign(data);
        if (started_) top_up(c, now);
    }

    void error(const Client& c, const char* what, std::string_view line) {
        if (errors_++ < 10)
            std::fprintf(stderr, "pubsub_load: client %u: %s: \"%.*s\"\n", c.id, what,
                         static_cast<int>(std::min<std::size_t>(line.size(), 100)), line.data());
    }

    /// One line received by `c`, without its "\n".
    void on_line(Client& c, std::string_view line, Clock::time_point now) {
        if (!c.joined) {
            if (line != "JOINED " + std::to_string(c.room_first / o_.room_size)) {
                error(c, "expected JOINED", line);
                drop(c);
                return;
            }
            c.joined = true;
            ++joined_;
            return;
        }
        unsigned long id = 0, seq = 0;
        const char* p = line.data();
        const char* end = p + line.size();
        auto r1 = std::from_chars(p, end, id);
        auto r2 = r1.ec == std::errc{} && r1.ptr < end && *r1.ptr == ' '
                      ? std::from_chars(r1.ptr + 1, end, seq)
                      : std::from_chars_result{p, std::errc::invalid_argument};
        if (r2.ec != std::errc{} || r2.ptr >= end || *r2.ptr != ' ' || line.size() + 1 != o_.size || end - r2.ptr < 2 ||
            r2.ptr[1] != padding(id, seq) || end[-1] != padding(id, seq)) {
            error(c, "malformed line", line);
            return;
        }
        ++delivered_;
        if (id < c.room_first || id - c.room_first >= c.next.size()) {
            error(c, "a line from another room", line);
            return;
        }
        std::uint64_t& next = c.next[id - c.room_first];
        if (seq != next) error(c, seq > next ? "a gap in a sender's lines" : "a sender's line out of order", line);
        next = seq + 1;
        if (id == c.id) {
            const auto rtt = now - c.sent_at[c.acked % o_.window];
            ack_ns_.push_back(
                static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(rtt).count()));
            ++c.acked;
        }
    }

    /// Whether `c` has lines left to send (now or, paced, later).
    bool has_more(const Client& c, Clock::time_point now) const {
        return o_.lines > 0 ? c.sent < o_.lines : now < deadline_;
    }
    bool may_send(const Client& c, Clock::time_point now) const {
        return has_more(c, now) && (o_.rate == 0 || now >= due(c));
    }

    /// With --rate: when `c` may send its next line.
    Clock::time_point due(const Client& c) const {
        const double k = static_cast<double>(c.sent) * static_cast<double>(o_.clients) + c.id;
        return start_ + to_duration(k / o_.rate);
    }

    /// Sends `c`'s next lines while its window has room.
    void top_up(Client& c, Clock::time_point now) {
        if (c.dropped) return;
        const bool was_empty = c.out.empty();
        while (c.sent - c.acked < o_.window && may_send(c, now)) {
            const std::size_t at = c.out.size();
            c.out.append(std::to_string(c.id)).push_back(' ');
            c.out.append(std::to_string(c.sent)).push_back(' ');
            c.out.append(o_.size - 1 - (c.out.size() - at), padding(c.id, c.sent)).push_back('\n');
            c.sent_at[c.sent % o_.window] = now;
            ++c.sent;
        }
        if (was_empty && !c.out.empty()) flush(c);
    }

    void flush(Client& c) {
        while (!c.out.empty()) {
            const ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
            if (n > 0) {
                c.out.erase(0, static_cast<std::size_t>(n));
            } else if (errno == EAGAIN) {
                break;
            } else if (errno != EINTR) {
                drop(c);
                return;
            }
        }
        const bool want = !c.out.empty();
        if (want != c.want_out) {
            epoll_event ev{};
            ev.events = want ? EPOLLIN | EPOLLOUT : EPOLLIN;
            ev.data.u32 = c.id;
            ::epoll_ctl(epoll_, EPOLL_CTL_MOD, c.fd, &ev);
            c.want_out = want;
        }
    }

    void drop(Client& c) {
        if (c.dropped) return;
        c.dropped = true;
        if (dropped_ < 10) {  // when and where it happened, for whoever looks into it
            std::uint64_t received = 0;
            for (const std::uint64_t n : c.next) received += n;
            const double at = started_ ? std::chrono::duration<double>(Clock::now() - start_).count() : 0;
            std::fprintf(stderr,
                         "pubsub_load: client %u dropped by the server %.3f s after the start (sent %llu, %llu seen "
                         "back, %llu received)\n",
                         c.id, at, static_cast<unsigned long long>(c.sent), static_cast<unsigned long long>(c.acked),
                         static_cast<unsigned long long>(received));
        }
        ++dropped_;
        if (c.joined) --joined_;
        ::close(c.fd);  // also takes it out of the epoll set
        c.fd = -1;
    }

    /// Whether every client that is left has seen its own lines back and every line of every
    /// sender of its room that is left.
    bool finished(Clock::time_point now) const {
        for (const Client& c : clients_)
            if (!c.dropped && (c.acked != c.sent || has_more(c, now))) return false;
        for (const Client& c : clients_) {
            if (c.dropped) continue;
            for (std::size_t m = 0; m < c.next.size(); ++m) {
                const Client& sender = clients_[c.room_first + m];
                if (!sender.dropped && c.next[m] != sender.sent) return false;
            }
        }
        return true;
    }

    void report(Clock::time_point end) {
        const double secs = std::chrono::duration<double>(end - start_).count();
        std::uint64_t sent = 0, sent_min = UINT64_MAX, sent_max = 0;
        for (const Client& c : clients_) {
            sent += c.sent;
            if (c.dropped) continue;
            sent_min = std::min(sent_min, c.sent);
            sent_max = std::max(sent_max, c.sent);
        }
        if (sent_min == UINT64_MAX) sent_min = 0;
        const auto percentile_us = [this](double q) {
            if (ack_ns_.empty()) return 0.0;
            const std::size_t k = std::min(ack_ns_.size() - 1, static_cast<std::size_t>(q * ack_ns_.size()));
            std::nth_element(ack_ns_.begin(), ack_ns_.begin() + static_cast<std::ptrdiff_t>(k), ack_ns_.end());
            return static_cast<double>(ack_ns_[k]) / 1e3;
        };
        const double p50 = percentile_us(0.50), p99 = percentile_us(0.99);
        std::printf(
            "bench=fanout_pubsub runtime=%s workers=%lu ops=%llu secs=%.4f rate=%llu room_size=%lu clients=%lu "
            "window=%lu size=%lu lines_sent=%llu sent_min=%llu sent_max=%llu p50_us=%.1f p99_us=%.1f "
            "dropped=%zu errors=%llu offered=%.0f\n",
            o_.runtime.c_str(), o_.workers, static_cast<unsigned long long>(delivered_), secs,
            static_cast<unsigned long long>(secs > 0 ? static_cast<double>(delivered_) / secs : 0), o_.room_size,
            o_.clients, o_.window, o_.size, static_cast<unsigned long long>(sent),
            static_cast<unsigned long long>(sent_min), static_cast<unsigned long long>(sent_max), p50, p99, dropped_,
            static_cast<unsigned long long>(errors_), o_.rate);
        std::fflush(stdout);
    }

    const Options o_;
    std::vector<Client> clients_;
    int epoll_ = -1;
    std::size_t joined_ = 0;   // clients that got their JOINED answer and were not dropped
    std::size_t dropped_ = 0;  // clients the server closed
    bool started_ = false;     // every client has joined: they send
    std::uint64_t delivered_ = 0;
    std::uint64_t errors_ = 0;
    std::vector<std::uint64_t> ack_ns_;  // send-to-ack time of every acknowledged line
    Clock::time_point start_{};
    Clock::time_point deadline_{};
    char buf_[64 * 1024];
};

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse_options(argc, argv);
    auto load = std::make_unique<Load>(o);
    return load->run();
}
