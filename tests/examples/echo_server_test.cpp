// tests/examples/echo_server_test.cpp: runs examples/echo_server as a child process and
// talks to it over plain POSIX sockets and poll() (no eddy on this side, so the client cannot
// share a bug with the server).
//
// The server binary comes from EDDY_ECHO_SERVER (set by tests/meson.build). It is always
// started with port 0 and tells us its port on its first line, so no fixed port can collide.
// It is stopped with SIGTERM when each test ends (a clean shutdown, exit status 0; SIGKILL if
// it does not exit within kDeadline); if this process dies first, PR_SET_PDEATHSIG kills it.
// The child process and the client are tests/support/child_process.hpp and line_client.hpp,
// shared with service_test.cpp.
#include <doctest/doctest.h>

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../support/child_process.hpp"
#include "../support/line_client.hpp"

namespace {

using eddy::test::child::Client;
using eddy::test::child::Clock;
using eddy::test::child::Exit;
using eddy::test::child::kDeadline;
using eddy::test::child::ms_left;

/// examples/echo_server: its binary is named by EDDY_ECHO_SERVER; our own EDDY_PORT /
/// EDDY_WORKERS (if any) must not leak into the test.
const eddy::test::child::Program kEchoServer{"echo_server", "EDDY_ECHO_SERVER", {"EDDY_PORT=", "EDDY_WORKERS="}};

/// The echo server, running as a child process. Its stdout is a pipe (we read the first
/// line from it), its stderr a temporary file (checked by the tests, shown on failure).
class Server : public eddy::test::child::ChildProcess {
public:
    /// Starts the server with `args`; `env` entries ("NAME=value") replace or add to ours;
    /// `max_files` > 0 caps its descriptors (RLIMIT_NOFILE).
    Server(std::vector<std::string> args, std::vector<std::string> env = {}, rlim_t max_files = 0)
        : ChildProcess(kEchoServer, std::move(args), std::move(env), max_files) {}

    /// Its port, from the first line "echo_server runtime=eddy workers=N listening=ADDR";
    /// `workers` gets N. Skips the whole test (77) if the server cannot use io_uring here.
    std::uint16_t port(std::size_t* workers = nullptr) { return listening_port(first_line(), workers); }
};

/// Sends messages[i] on the socket clients[i], all at once, and returns what each got back
/// once it has received as many bytes as it sent (or kDeadline passed). Sending and receiving
/// interleave, so a big message cannot deadlock on full socket buffers.
std::vector<std::string> echo_all(const std::vector<int>& clients, const std::vector<std::string>& messages) {
    REQUIRE(clients.size() == messages.size());
    const std::size_t n = clients.size();
    std::vector<std::size_t> sent(n, 0);
    std::vector<std::string> got(n);
    const auto deadline = Clock::now() + kDeadline;
    for (;;) {
        std::vector<pollfd> fds;
        std::vector<std::size_t> who;
        for (std::size_t i = 0; i < n; ++i) {
            if (got[i].size() >= messages[i].size()) continue;
            short events = POLLIN;
            if (sent[i] < messages[i].size()) events |= POLLOUT;
            fds.push_back(pollfd{clients[i], events, 0});
            who.push_back(i);
        }
        if (fds.empty()) return got;
        const int ready = ::poll(fds.data(), fds.size(), ms_left(deadline));
        if (ready <= 0) {
            FAIL_CHECK("echo_all: no progress before the deadline");
            return got;
        }
        for (std::size_t k = 0; k < fds.size(); ++k) {
            const std::size_t i = who[k];
            if ((fds[k].revents & POLLOUT) != 0) {
                const ssize_t w =
                    ::send(clients[i], messages[i].data() + sent[i], messages[i].size() - sent[i], MSG_NOSIGNAL);
                if (w > 0) sent[i] += static_cast<std::size_t>(w);
                else if (errno != EAGAIN && errno != EINTR) FAIL("send: " << std::string(std::strerror(errno)));
            }
            if ((fds[k].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
                char buf[65536];
                const ssize_t r = ::recv(clients[i], buf, sizeof buf, 0);
                if (r > 0) got[i].append(buf, static_cast<std::size_t>(r));
                else if (r == 0) {
                    FAIL_CHECK("echo_all: the server closed connection " << i << " early");
                    return got;
                } else if (errno != EAGAIN && errno != EINTR) {
                    FAIL("recv: " << std::string(std::strerror(errno)));
                }
            }
        }
    }
}

std::vector<std::string> echo_all(const std::vector<Client>& clients, const std::vector<std::string>& messages) {
    std::vector<int> fds;
    for (const Client& c : clients) fds.push_back(c.fd());
    return echo_all(fds, messages);
}

std::string echo(const Client& c, const std::string& message) {
    return echo_all(std::vector<int>{c.fd()}, {message}).front();
}

/// A message whose every byte depends on its position and on `seed`, so a lost, repeated or
/// reordered chunk shows.
std::string pattern(std::size_t size, unsigned seed) {
    std::string s(size, '\0');
    for (std::size_t i = 0; i < size; ++i) s[i] = static_cast<char>((i * 31 + seed * 7 + i / 4096) % 251);
    return s;
}

}  // namespace

TEST_CASE("echo_server announces itself and echoes many clients at once") {
    Server server({"--port", "0", "--workers", "2"});
    std::size_t workers = 0;
    const std::uint16_t port = server.port(&workers);
    CHECK(workers == 2);

    // Eight connections open together. Answering the last one first only works if the
    // server runs them concurrently (one task each), not one after the other.
    std::vector<Client> clients;
    for (int i = 0; i < 8; ++i) clients.emplace_back(port);
    for (int i = 7; i >= 0; --i) {
        const std::string msg = "hello from client " + std::to_string(i) + "\n";
        CHECK(echo(clients[static_cast<std::size_t>(i)], msg) == msg);
    }

    // Then all of them at once, each several times over the same connection.
    for (int round = 0; round < 3; ++round) {
        std::vector<std::string> msgs;
        for (int i = 0; i < 8; ++i) msgs.push_back(pattern(1000 + static_cast<std::size_t>(i) * 100, round * 8 + i));
        CHECK(echo_all(clients, msgs) == msgs);
    }

    // An orderly close from the client ends the connection: the server closes its side too.
    REQUIRE(::shutdown(clients[3].fd(), SHUT_WR) == 0);
    CHECK(clients[3].sees_end_of_stream());
    CHECK(server.running());
    const Exit e = server.stop();
    CHECK(e.err == "");
}

TEST_CASE("echo_server returns a 100 KiB message whole and in order, on several connections at once") {
    Server server({"--port", "0", "--workers", "2"});
    const std::uint16_t port = server.port();
    {
        Client c(port);
        const std::string big = pattern(100 * 1024, 1);
        CHECK(echo(c, big) == big);  // far more than the 4 KiB buffer: many reads and writes
    }
    std::vector<Client> clients;
    std::vector<std::string> msgs;
    for (unsigned i = 0; i < 4; ++i) {
        clients.emplace_back(port);
        msgs.push_back(pattern(100 * 1024, 10 + i));
    }
    CHECK(echo_all(clients, msgs) == msgs);
    CHECK(server.running());
}

TEST_CASE("a reset connection ends only that connection") {
    Server server({"--port", "0", "--workers", "2"});
    const std::uint16_t port = server.port();
    Client bystander(port);
    CHECK(echo(bystander, "before\n") == "before\n");

    {
        // Reset while the server is idle on this connection: its read fails.
        Client c(port);
        CHECK(echo(c, "ping\n") == "ping\n");
        c.reset();
    }
    {
        // Reset while the server still has echo data to write: send 1 MiB, read nothing.
        Client c(port);
        const std::string big = pattern(1024 * 1024, 2);
        std::size_t sent = 0;
        const auto deadline = Clock::now() + kDeadline;
        while (sent < big.size() && Clock::now() < deadline) {
            pollfd p{c.fd(), POLLOUT, 0};
            if (::poll(&p, 1, 50) <= 0) break;  // both directions' buffers are full
            const ssize_t w = ::send(c.fd(), big.data() + sent, big.size() - sent, MSG_NOSIGNAL);
            if (w > 0) sent += static_cast<std::size_t>(w);
        }
        CHECK(sent > 0);
        c.reset();
    }

    // The server goes on: the old connection still works, and new ones are accepted.
    CHECK(echo(bystander, "after\n") == "after\n");
    for (int i = 0; i < 4; ++i) {
        Client c(port);
        const std::string msg = "new client " + std::to_string(i);
        CHECK(echo(c, msg) == msg);
    }
    CHECK(server.running());
    // A reset is routine for an echo server: nothing printed for it.
    const Exit e = server.stop();
    CHECK(e.err == "");
}

TEST_CASE("out of descriptors: accept backs off and recovers once connections close") {
#ifdef EDDY_TEST_UBSAN
    // UBSan's vptr check probes memory through a pipe; in a process that is out of
    // descriptors the probe fails and it reports every virtual call as a bad vptr (clang 14),
    // here the error_category call inside std::system_error's constructor. A sanitizer
    // limitation, not a finding: the plain and TSan builds run this case.
    MESSAGE("skipped under UBSan: its vptr check needs a free descriptor");
    return;
#endif
    // 32 descriptors: a few go to the runtime and the listener, the rest to connections.
    Server server({"--port", "0", "--workers", "2"}, {}, 32);
    const std::uint16_t port = server.port();
    // The kernel completes the handshake of connections nobody accepted yet (the backlog),
    // so all of these connect; the server can take only the first twenty-odd.
    std::vector<Client> clients;
    for (int i = 0; i < 40; ++i) clients.emplace_back(port);
    CHECK(server.wait_stderr("accept: eddy::net::TcpListener::accept: Too many open files"));
    CHECK(server.running());

    // The first 30 leave; the server closes their sockets and accepts the last 10.
    clients.erase(clients.begin(), clients.begin() + 30);
    std::vector<std::string> msgs;
    for (unsigned i = 0; i < clients.size(); ++i) msgs.push_back(pattern(5000, 100 + i));
    CHECK(echo_all(clients, msgs) == msgs);
    CHECK(server.running());
    const Exit e = server.stop();
    CHECK(e.err.find("connection:") == std::string::npos);  // only accept failed
}

TEST_CASE("EDDY_PORT and EDDY_WORKERS configure the server; --port and --workers beat them") {
    SUBCASE("from the environment") {
        Server server({}, {"EDDY_PORT=0", "EDDY_WORKERS=1"});
        std::size_t workers = 0;
        const std::uint16_t port = server.port(&workers);
        CHECK(workers == 1);
        Client c(port);
        CHECK(echo(c, "env") == "env");
    }
    SUBCASE("a flag wins: EDDY_PORT is not even read, EDDY_WORKERS is overridden") {
        Server server({"--port", "0", "--workers", "1"}, {"EDDY_PORT=not-a-port", "EDDY_WORKERS=2"});
        std::size_t workers = 0;
        const std::uint16_t port = server.port(&workers);
        CHECK(workers == 1);
        Client c(port);
        CHECK(echo(c, "flag") == "flag");
    }
}

TEST_CASE("a port in use: echo_server says so and exits with status 1") {
    Server first({"--port", "0", "--workers", "1"});
    const std::uint16_t port = first.port();
    Server second({"--port", std::to_string(port), "--workers", "1"});
    const std::optional<Exit> e = second.wait_exit();
    REQUIRE(e.has_value());
    CHECK(e->status == 1);
    CHECK(e->err.find("Address already in use") != std::string::npos);
    CHECK(first.running());
}

TEST_CASE("bad arguments: usage on stderr and exit status 2") {
    struct Case {
        std::vector<std::string> args;
        std::vector<std::string> env;
    };
    const std::vector<Case> cases = {
        {{"--bogus"}, {}},
        {{"--port"}, {}},
        {{"--port", "65536"}, {}},
        {{"--port", "-1"}, {}},
        {{"--port", "12ab"}, {}},
        {{"--workers", "0"}, {}},
        {{"--workers", "two"}, {}},
        {{"--host", "localhost"}, {}},
        {{"--port", "0", "extra"}, {}},
        {{}, {"EDDY_PORT=abc"}},
        {{"--port", "0"}, {"EDDY_WORKERS=0"}},  // rejected by the runtime itself
    };
    for (const Case& c : cases) {
        std::string what;
        for (const std::string& a : c.args) what += a + " ";
        for (const std::string& v : c.env) what += "(env " + v + ") ";
        CAPTURE(what);
        Server server(c.args, c.env);
        const std::optional<Exit> e = server.wait_exit();
        REQUIRE(e.has_value());
        CHECK(e->status == 2);
        CHECK(e->err.find("usage: echo_server") != std::string::npos);
    }
}

TEST_CASE("--help: usage on stdout and exit status 0") {
    Server server({"--help"});
    const std::optional<std::string> line = server.first_line();
    REQUIRE(line.has_value());
    CHECK(line->find("echo_server") == 0);
    const std::optional<Exit> e = server.wait_exit();
    REQUIRE(e.has_value());
    CHECK(e->status == 0);
    CHECK(e->err == "");
}

namespace {

/// Opens `open` idle connections (each echoes once, so the server serves it), plus one that
/// the client closes first; then sends `sig` and checks the clean shutdown: every open client
/// sees end of stream, the server exits with status 0, nothing on stderr, and its last line
/// reports the signal and the connections it closed.
void shutdown_on(int sig, const char* name, std::size_t open) {
    Server server({"--port", "0", "--workers", "2"});
    const std::uint16_t port = server.port();
    std::vector<Client> clients;
    for (std::size_t i = 0; i < open; ++i) clients.emplace_back(port);
    std::vector<std::string> msgs;
    for (std::size_t i = 0; i < open; ++i) msgs.push_back(pattern(3000 + i * 10, static_cast<unsigned>(200 + i)));
    CHECK(echo_all(clients, msgs) == msgs);  // the server echoes correctly before the signal
    {
        Client gone(port);  // ended by the client before the signal: not counted
        CHECK(echo(gone, "bye") == "bye");
        REQUIRE(::shutdown(gone.fd(), SHUT_WR) == 0);
        CHECK(gone.sees_end_of_stream());
    }
    for (std::size_t i = 0; i < open; ++i) {
        const std::string msg = "still here " + std::to_string(i);
        CHECK(echo(clients[i], msg) == msg);
    }
    CHECK(server.running());

    server.signal(sig);
    for (std::size_t i = 0; i < open; ++i) {
        CAPTURE(i);
        CHECK(clients[i].sees_end_of_stream());  // the server closed every connection
    }
    const std::optional<Exit> e = server.wait_exit();
    REQUIRE(e.has_value());
    CHECK(e->status == 0);
    CHECK(e->err == "");
    const std::string count = std::to_string(open) + (open == 1 ? " connection" : " connections");
    const std::string expected = std::string("echo_server: ") + name + ", draining " + count + "\n" +
                                 "echo_server: " + name + ", shut down; " + count + " closed\n";
    CHECK(server.rest_of_output() == expected);
}

}  // namespace

TEST_CASE("SIGTERM: every open connection is closed and the server exits with status 0") {
    shutdown_on(SIGTERM, "SIGTERM", 6);
}

TEST_CASE("SIGINT: every open connection is closed and the server exits with status 0") {
    shutdown_on(SIGINT, "SIGINT", 3);
}

TEST_CASE("SIGTERM with no connection open, and SIGINT right after start: status 0") {
    SUBCASE("no connection open") {
        Server server({"--port", "0", "--workers", "1"});
        (void)server.port();
        server.signal(SIGTERM);
        CHECK(server.wait_clean_exit() ==
              "echo_server: SIGTERM, draining 0 connections\necho_server: SIGTERM, shut down; 0 connections closed\n");
    }
    SUBCASE("a connection with data in flight") {
        // A client that has sent 64 KiB and reads nothing when the signal arrives: the server
        // echoes what has arrived (the drain), closes the socket once nothing more waits or
        // at the drain's deadline, and still exits cleanly (the client may see a reset).
        Server server({"--port", "0", "--workers", "2"});
        const std::uint16_t port = server.port();
        Client c(port);
        CHECK(echo(c, "x") == "x");
        const std::string big = pattern(64 * 1024, 3);
        (void)::send(c.fd(), big.data(), big.size(), MSG_NOSIGNAL);
        server.signal(SIGINT);
        CHECK(server.wait_clean_exit().find(
                  "echo_server: SIGINT, draining 1 connection\necho_server: SIGINT, shut down;") == 0);
    }
}
