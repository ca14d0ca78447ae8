// tests/support/child_process.hpp: runs an example program (examples/echo_server,
// examples/service) as a child process for the tests in tests/examples/, with plain POSIX
// calls only (no eddy on this side, so the test cannot share a bug with the program).
//
// The binary comes from an environment variable set by tests/meson.build. The child gets our
// environment minus the variables the test names (so ours cannot leak into it) plus the
// test's own. Its stdout is a pipe, its stderr a temporary file (checked by the tests, shown
// on failure). It is stopped with SIGTERM when the test ends (SIGKILL if it does not exit
// within kDeadline); if this process dies first, PR_SET_PDEATHSIG kills it. Every wait is
// bounded by kDeadline and only catches a hang: nothing here measures time.
//
// The names live in eddy::test::child, apart from tests/support/waiting.hpp's kDeadline.
#pragma once

#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

extern char** environ;

namespace eddy::test::child {

/// How long any single wait may take before we call it a hang (never slowness).
inline constexpr auto kDeadline = std::chrono::seconds(20);

using Clock = std::chrono::steady_clock;

inline int ms_left(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left < 0 ? 0 : static_cast<int>(left);
}

inline std::string read_whole_file(int fd) {
    std::string text;
    char buf[4096];
    for (off_t at = 0;;) {
        const ssize_t n = ::pread(fd, buf, sizeof buf, at);
        if (n <= 0) return text;
        text.append(buf, static_cast<std::size_t>(n));
        at += n;
    }
}

inline bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

/// `err` without the runtime's notice that it runs on the readiness driver because io_uring
/// is refused here (a run under tools/no-io-uring; one line per process, and a program that
/// execs its next generation has two): the tests' "nothing on stderr" is about what the
/// program says, the same on either driver.
inline std::string without_driver_note(std::string err) {
    static constexpr std::string_view kHead = "eddy: io_uring is unavailable: ";
    static constexpr std::string_view kTail = "; using the readiness driver (epoll)";
    for (std::size_t at = 0; (at = err.find(kHead, at)) != std::string::npos;) {
        const std::size_t end = err.find('\n', at);
        const bool line_start = at == 0 || err[at - 1] == '\n';
        if (line_start && end != std::string::npos && end >= kTail.size() &&
            err.compare(end - kTail.size(), kTail.size(), kTail) == 0) {
            err.erase(at, end + 1 - at);
        } else {
            at += kHead.size();
        }
    }
    return err;
}

/// What a finished child left behind.
struct Exit {
    int status;       // exit code, or 128 + signal
    std::string err;  // its standard error
};

/// Which program a ChildProcess runs.
struct Program {
    std::string name;        // in messages ("<name>'s stderr") and its first line ("<name> runtime=eddy ...")
    std::string binary_env;  // the environment variable naming its binary
    std::vector<std::string> dropped_env;  // prefixes ("EDDY_", "EDDY_PORT=") of our variables it does not get
};

/// A program running as a child process.
class ChildProcess {
public:
    /// Starts `program` with `args`; `env` entries ("NAME=value") are added to ours minus
    /// `program.dropped_env`; `max_files` > 0 caps its descriptors (RLIMIT_NOFILE).
    ChildProcess(const Program& program, std::vector<std::string> args, std::vector<std::string> env,
                 rlim_t max_files = 0)
        : name_(program.name) {
        const char* path = std::getenv(program.binary_env.c_str());
        REQUIRE_MESSAGE(path != nullptr, program.binary_env << " must name the " << name_ << " binary");

        // Everything exec needs is built before fork: the child only calls async-signal-safe
        // functions.
        args.insert(args.begin(), path);
        std::vector<char*> argv;
        for (std::string& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        std::vector<std::string> envs;
        for (char** e = environ; *e != nullptr; ++e) {
            bool dropped = false;
            for (const std::string& prefix : program.dropped_env)
                dropped = dropped || std::strncmp(*e, prefix.c_str(), prefix.size()) == 0;
            if (!dropped) envs.emplace_back(*e);
        }
        for (std::string& e : env) envs.push_back(std::move(e));
        std::vector<char*> envp;
        for (std::string& e : envs) envp.push_back(e.data());
        envp.push_back(nullptr);

        int out[2];
        REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
        std::string err_name = "/tmp/eddy-" + name_ + "-stderr-XXXXXX";
        err_fd_ = ::mkostemp(err_name.data(), O_CLOEXEC);
        REQUIRE(err_fd_ >= 0);
        ::unlink(err_name.c_str());

        const pid_t parent = ::getpid();
        pid_ = ::fork();
        REQUIRE(pid_ >= 0);
        if (pid_ == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
            if (max_files > 0) {
                const rlimit lim{max_files, max_files};
                if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) ::_exit(127);
            }
            ::dup2(out[1], STDOUT_FILENO);  // dup2 clears close-on-exec
            ::dup2(err_fd_, STDERR_FILENO);
            ::execve(path, argv.data(), envp.data());
            ::_exit(127);
        }
        ::close(out[1]);
        out_fd_ = out[0];
    }

    ChildProcess(const ChildProcess&) = delete;
    ChildProcess& operator=(const ChildProcess&) = delete;

    ~ChildProcess() {
        const Exit e = finish();
        // Show what the test did not look at itself (a sanitizer report, say).
        if (!checked_ && !e.err.empty()) MESSAGE(name_ << "'s stderr (exit status " << e.status << "):\n" << e.err);
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

    /// The first line of standard output (without '\n', and consumed), or nullopt if the
    /// process exits or stays silent for kDeadline.
    std::optional<std::string> first_line() {
        std::optional<std::string> line = read_through_line("");
        if (line) line->pop_back();
        return line;
    }

    /// Its port, from `line` "<name> runtime=eddy workers=N listening=ADDR..." (nullopt: it
    /// printed none); `workers` gets N. Skips the whole test (77) if the program cannot use
    /// io_uring here.
    std::uint16_t listening_port(const std::optional<std::string>& line, std::size_t* workers) {
        if (!line) {
            const Exit e = finish();
            if (e.err.find("io_uring is unavailable") != std::string::npos) {
                std::printf("SKIP: %s", e.err.c_str());
                std::fflush(stdout);
                std::_Exit(77);  // meson's "skipped": this kernel cannot run a Runtime at all
            }
            FAIL(name_ << " printed no listening line; exit status " << e.status << ", stderr:\n" << e.err);
        }
        const std::string prefix = name_ + " runtime=eddy ";
        unsigned n = 0, a = 0, b = 0, c = 0, d = 0, port = 0;
        const int got = starts_with(*line, prefix.c_str())
                            ? std::sscanf(line->c_str() + prefix.size(), "workers=%u listening=%u.%u.%u.%u:%u", &n, &a,
                                          &b, &c, &d, &port)
                            : 0;
        INFO("line: " << *line);
        REQUIRE(got == 6);
        CHECK((a == 127 && b == 0 && c == 0 && d == 1));
        REQUIRE(port > 0);
        REQUIRE(port < 65536);
        if (workers != nullptr) *workers = n;
        return static_cast<std::uint16_t>(port);
    }

    /// Standard output not consumed yet, up to end of file (the process exited, e.g. after
    /// wait_exit()), or what came before kDeadline.
    std::string rest_of_output() {
        const auto deadline = Clock::now() + kDeadline;
        while (out_fd_ >= 0) {
            pollfd p{out_fd_, POLLIN, 0};
            if (::poll(&p, 1, ms_left(deadline)) <= 0) break;
            char buf[4096];
            const ssize_t n = ::read(out_fd_, buf, sizeof buf);
            if (n <= 0) break;
            out_.append(buf, static_cast<std::size_t>(n));
        }
        return std::exchange(out_, {});
    }

    /// Sends `sig` to the process.
    void signal(int sig) {
        REQUIRE(pid_ > 0);
        REQUIRE(::kill(pid_, sig) == 0);
    }

    /// Polls its stderr (up to kDeadline) until it contains `text`.
    bool wait_stderr(const std::string& text) {
        const auto deadline = Clock::now() + kDeadline;
        while (read_whole_file(err_fd_).find(text) == std::string::npos) {
            if (Clock::now() > deadline) return false;
            ::usleep(1000);
        }
        return true;
    }

    /// True while the process runs.
    bool running() {
        if (pid_ < 0) return false;
        int status = 0;
        const pid_t r = ::waitpid(pid_, &status, WNOHANG);
        if (r == 0) return true;
        exit_ = decode(status);
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
        return stop();
    }

    /// Waits (up to kDeadline) for the process to exit by itself, checks that it ended
    /// cleanly (status 0, nothing on stderr) and returns the rest of its standard output.
    std::string wait_clean_exit() {
        const std::optional<Exit> e = wait_exit();
        REQUIRE_MESSAGE(e.has_value(), name_ << " did not exit");
        CHECK(e->status == 0);
        CHECK(e->err == "");
        return rest_of_output();
    }

    /// Stops it if still running (SIGTERM, the signal an operator would send; SIGKILL if it
    /// has not exited after kDeadline), reaps it and returns how it ended, for the test to
    /// check. Idempotent.
    Exit stop() {
        checked_ = true;
        return finish();
    }

private:
    Exit finish() {
        if (pid_ > 0) {
            ::kill(pid_, SIGTERM);
            const auto deadline = Clock::now() + kDeadline;
            while (running()) {
                if (Clock::now() > deadline) {
                    ::kill(pid_, SIGKILL);  // a shutdown that hangs: the test sees status 128+9
                    int status = 0;
                    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
                    }
                    exit_ = decode(status);
                    pid_ = -1;
                    break;
                }
                ::usleep(1000);  // polling a child's exit: there is no fd to wait on here
            }
        }
        if (out_fd_ >= 0) {
            // The process is gone, so this reaches end of file: keep what it printed last.
            char buf[4096];
            for (ssize_t n; (n = ::read(out_fd_, buf, sizeof buf)) > 0;) out_.append(buf, static_cast<std::size_t>(n));
            ::close(std::exchange(out_fd_, -1));
        }
        if (err_fd_ >= 0) {
            err_ = without_driver_note(read_whole_file(err_fd_));
            ::close(std::exchange(err_fd_, -1));
        }
        return Exit{exit_, err_};
    }

    static int decode(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

    std::string name_;
    pid_t pid_ = -1;
    int out_fd_ = -1;
    int err_fd_ = -1;
    int exit_ = -1;
    std::string out_;  // standard output read but not yet consumed
    std::string err_;
    bool checked_ = false;  // the test looked at how it ended
};

/// An example server (echo_server, http_hello, kv_server, ...) started on a free port with
/// two workers unless told otherwise; port() reads its first line.
/// The output of `command` (a shell command line: curl, wrk), and its wait status in `*status`.
inline std::string run_command(const std::string& command, int* status) {
    std::string out;
    FILE* p = ::popen(command.c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    *status = ::pclose(p);
    return out;
}

class ServerProcess : public ChildProcess {
public:
    explicit ServerProcess(const Program& program, std::vector<std::string> args = {"--port", "0", "--workers", "2"},
                           std::vector<std::string> env = {}, rlim_t max_files = 0)
        : ChildProcess(program, std::move(args), std::move(env), max_files) {}

    /// Its port, from the first line "<name> runtime=eddy workers=N listening=ADDR"; `workers`
    /// gets N. Skips the whole test (77) if the server cannot use io_uring here.
    std::uint16_t port(std::size_t* workers = nullptr) { return listening_port(first_line(), workers); }
};

}  // namespace eddy::test::child
