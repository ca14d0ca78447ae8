// tests/examples/service_test.cpp: runs examples/service as a child process and talks to it
// over plain POSIX sockets and poll() (no eddy on this side), as echo_server_test.cpp does.
//
// The binary comes from EDDY_SERVICE (set by tests/meson.build). It is configured through its
// environment only: every EDDY_* and SERVICE_* variable of ours is dropped, the test's own are
// added. It always listens on a free port (SERVICE_PORT unset) and tells us the port on its
// first line. Each test stops it with SIGTERM at the end (SIGKILL after kDeadline); if this
// process dies first, PR_SET_PDEATHSIG kills it. Every wait is bounded by kDeadline and only
// catches a hang: nothing here measures time.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

extern char** environ;

namespace {

/// How long any single wait may take before we call it a hang (never slowness).
constexpr auto kDeadline = std::chrono::seconds(20);

using Clock = std::chrono::steady_clock;

int ms_left(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left < 0 ? 0 : static_cast<int>(left);
}

std::string read_whole_file(int fd) {
    std::string text;
    char buf[4096];
    for (off_t at = 0;;) {
        const ssize_t n = ::pread(fd, buf, sizeof buf, at);
        if (n <= 0) return text;
        text.append(buf, static_cast<std::size_t>(n));
        at += n;
    }
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

/// What a finished child left behind.
struct Exit {
    int status;       // exit code, or 128 + signal
    std::string err;  // its standard error
};

/// The service, running as a child process. Its stdout is a pipe, its stderr a temporary file.
class Service {
public:
    /// Starts the service; `env` entries ("NAME=value") are added to ours minus EDDY_* and
    /// SERVICE_*.
    explicit Service(std::vector<std::string> env) {
        const char* path = std::getenv("EDDY_SERVICE");
        REQUIRE_MESSAGE(path != nullptr, "EDDY_SERVICE must name the service binary");

        // Everything exec needs is built before fork: the child only calls async-signal-safe
        // functions.
        std::string arg0 = path;
        char* argv[] = {arg0.data(), nullptr};
        std::vector<std::string> envs;
        for (char** e = environ; *e != nullptr; ++e)
            if (std::strncmp(*e, "EDDY_", 5) != 0 && std::strncmp(*e, "SERVICE_", 8) != 0) envs.emplace_back(*e);
        for (std::string& e : env) envs.push_back(std::move(e));
        std::vector<char*> envp;
        for (std::string& e : envs) envp.push_back(e.data());
        envp.push_back(nullptr);

        int out[2];
        REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
        char err_name[] = "/tmp/eddy-service-stderr-XXXXXX";
        err_fd_ = ::mkostemp(err_name, O_CLOEXEC);
        REQUIRE(err_fd_ >= 0);
        ::unlink(err_name);

        const pid_t parent = ::getpid();
        pid_ = ::fork();
        REQUIRE(pid_ >= 0);
        if (pid_ == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
            ::dup2(out[1], STDOUT_FILENO);             // dup2 clears close-on-exec
            ::dup2(err_fd_, STDERR_FILENO);
            ::execve(path, argv, envp.data());
            ::_exit(127);
        }
        ::close(out[1]);
        out_fd_ = out[0];
    }

    Service(const Service&) = delete;
    Service& operator=(const Service&) = delete;

    ~Service() {
        const Exit e = finish();
        if (!checked_ && !e.err.empty()) MESSAGE("service's stderr (exit status " << e.status << "):\n" << e.err);
    }

    pid_t pid() const { return pid_; }

    /// Reads stdout until a whole line starting with `prefix` has arrived; returns everything
    /// up to and including that line (and consumes it), or nullopt after kDeadline or at end of
    /// file.
    std::optional<std::string> read_through_line(const char* prefix) {
        const auto deadline = Clock::now() + kDeadline;
        for (;;) {
            for (std::size_t at = 0; at < out_.size();) {
                const std::size_t nl = out_.find('\n', at);
                if (nl == std::string::npos) break;
                if (out_.compare(at, std::strlen(prefix), prefix) == 0) {
                    std::string text = out_.substr(0, nl + 1);
                    out_.erase(0, nl + 1);
                    return text;
                }
                at = nl + 1;
            }
            if (out_fd_ < 0) return std::nullopt;
            pollfd p{out_fd_, POLLIN, 0};
            if (::poll(&p, 1, ms_left(deadline)) <= 0) return std::nullopt;
            char buf[4096];
            const ssize_t n = ::read(out_fd_, buf, sizeof buf);
            if (n <= 0) return std::nullopt;
            out_.append(buf, static_cast<std::size_t>(n));
        }
    }

    /// Its port, from the first line "service runtime=eddy workers=N listening=ADDR
    /// idle_timeout_ms=T"; `workers` gets N. Skips the whole test (77) if the service cannot
    /// use io_uring here.
    std::uint16_t port(std::size_t* workers = nullptr) {
        const std::optional<std::string> line = read_through_line("service runtime=eddy ");
        if (!line) {
            const Exit e = finish();
            if (e.err.find("io_uring is unavailable") != std::string::npos) {
                std::printf("SKIP: %s", e.err.c_str());
                std::fflush(stdout);
                std::_Exit(77);  // meson's "skipped": this kernel cannot run a Runtime at all
            }
            FAIL("service printed no listening line; exit status " << e.status << ", stderr:\n" << e.err);
        }
        unsigned n = 0, a = 0, b = 0, c = 0, d = 0, port = 0;
        const int got = std::sscanf(line->c_str(), "service runtime=eddy workers=%u listening=%u.%u.%u.%u:%u", &n, &a,
                                    &b, &c, &d, &port);
        INFO("line: " << *line);
        REQUIRE(got == 6);
        CHECK((a == 127 && b == 0 && c == 0 && d == 1));
        REQUIRE(port > 0);
        REQUIRE(port < 65536);
        if (workers != nullptr) *workers = n;
        return static_cast<std::uint16_t>(port);
    }

    void signal(int sig) {
        REQUIRE(pid_ > 0);
        REQUIRE(::kill(pid_, sig) == 0);
    }

    bool running() {
        if (pid_ < 0) return false;
        int status = 0;
        const pid_t r = ::waitpid(pid_, &status, WNOHANG);
        if (r == 0) return true;
        exit_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        pid_ = -1;
        return false;
    }

    /// Waits (up to kDeadline) for the process to exit by itself; nullopt if it does not.
    std::optional<Exit> wait_exit() {
        const auto deadline = Clock::now() + kDeadline;
        while (running()) {
            if (Clock::now() > deadline) return std::nullopt;
            ::usleep(1000);  // polling a child's exit: there is no fd to wait on here
        }
        checked_ = true;
        return finish();
    }

    /// Standard output not consumed yet, up to end of file (call after wait_exit()).
    std::string rest_of_output() { return std::exchange(out_, {}); }

private:
    Exit finish() {
        if (pid_ > 0) {
            ::kill(pid_, SIGTERM);
            const auto deadline = Clock::now() + kDeadline;
            while (running()) {
                if (Clock::now() > deadline) {
                    ::kill(pid_, SIGKILL);  // a shutdown that hangs: status 128+9
                    int status = 0;
                    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
                    }
                    exit_ = 128 + SIGKILL;
                    pid_ = -1;
                    break;
                }
                ::usleep(1000);
            }
        }
        if (out_fd_ >= 0) {
            // The process is gone, so this reaches end of file: keep what it printed last.
            char buf[4096];
            for (ssize_t n; (n = ::read(out_fd_, buf, sizeof buf)) > 0;) out_.append(buf, static_cast<std::size_t>(n));
            ::close(std::exchange(out_fd_, -1));
        }
        if (err_fd_ >= 0) {
            err_ = read_whole_file(err_fd_);
            ::close(std::exchange(err_fd_, -1));
        }
        return Exit{exit_, err_};
    }

    pid_t pid_ = -1;
    int out_fd_ = -1;
    int err_fd_ = -1;
    int exit_ = -1;
    std::string out_;  // standard output read but not yet consumed
    std::string err_;
    bool checked_ = false;
};

/// A connected client socket, non-blocking: every wait below is a poll() with a deadline.
class Client {
public:
    explicit Client(std::uint16_t port) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        REQUIRE(fd_ >= 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE_MESSAGE(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0,
                        "connect: " << std::string(std::strerror(errno)));
        REQUIRE(::fcntl(fd_, F_SETFL, O_NONBLOCK) == 0);
    }
    Client(Client&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    Client& operator=(Client&&) = delete;
    ~Client() {
        if (fd_ >= 0) ::close(fd_);
    }

    /// Sends `text` (small: one send) and returns what comes back once it holds `lines` line
    /// ends (or whatever came before kDeadline or end of stream).
    std::string request(const std::string& text, std::size_t lines) {
        REQUIRE(::send(fd_, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size()));
        std::string got;
        const auto deadline = Clock::now() + kDeadline;
        while (static_cast<std::size_t>(std::count(got.begin(), got.end(), '\n')) < lines) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, ms_left(deadline)) <= 0) break;
            char buf[4096];
            const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n > 0) got.append(buf, static_cast<std::size_t>(n));
            else if (n == 0 || (errno != EAGAIN && errno != EINTR)) break;
        }
        return got;
    }

    /// Waits until the service closes its side: true if recv returns 0 (end of stream) before
    /// kDeadline with no further data.
    bool sees_end_of_stream() {
        const auto deadline = Clock::now() + kDeadline;
        for (;;) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, ms_left(deadline)) <= 0) return false;
            char c;
            const ssize_t n = ::recv(fd_, &c, 1, 0);
            if (n == 0) return true;
            if (n > 0 || (errno != EAGAIN && errno != EINTR)) return false;
        }
    }

private:
    int fd_ = -1;
};

/// Checks that `block` is one whole RuntimeMetrics::to_string() of `workers` workers, after a
/// header line "service: <title>:".
void check_metrics_block(const std::string& block, const std::string& title, std::size_t workers) {
    INFO("metrics block:\n" << block);
    CHECK(block.find("service: " + title + ":\nruntime: workers=" + std::to_string(workers) + " ") !=
          std::string::npos);
    for (std::size_t i = 0; i < workers; ++i) CHECK(block.find("\nworker " + std::to_string(i) + ": polled=") != std::string::npos);
    CHECK(block.find("\nworker " + std::to_string(workers) + ":") == std::string::npos);
    CHECK(block.find("\nreactor: operations=") != std::string::npos);
}

} // namespace

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
        const std::optional<std::string> block = service.read_through_line("reactor: ");
        REQUIRE(block.has_value());
        check_metrics_block(*block, "SIGUSR1, metrics", 3);
        // Still serving: the open connection and a new one.
        CHECK(c.request("still here\n", 1) == "STILL HERE\n");
        Client fresh(port);
        CHECK(fresh.request("PING\n", 1) == "PONG\n");
    }
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
    CHECK(std::count(block.begin(), block.end(), '\n') == 1 + 1 + 2 + 1);  // header, runtime, workers, reactor
}

} // namespace

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
