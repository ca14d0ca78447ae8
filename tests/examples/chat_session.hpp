// tests/examples/chat_session.hpp: the clients of tests/examples/chat_server_test.cpp, with
// plain POSIX calls only (no eddy on this side): Chat, a TCP socket speaking chat_server's
// line protocol, and NcSession, a real `nc` (netcat-openbsd) whose standard input and output
// are pipes. Every wait is a poll() bounded by kDeadline, which only catches a hang.
#pragma once

#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "../support/child_process.hpp"  // kDeadline, Clock, ms_left
#include "../support/line_client.hpp"

namespace eddy::test::chat {

using child::Clock;
using child::kDeadline;
using child::ms_left;

/// Lines read from a descriptor (a socket or a pipe), kept across calls.
class LineReader {
public:
    /// The next line without its "\n", or nullopt at end of stream, on an error or after
    /// kDeadline.
    std::optional<std::string> next(int fd) {
        const auto deadline = Clock::now() + kDeadline;
        for (;;) {
            if (const std::size_t nl = buf_.find('\n'); nl != std::string::npos) {
                std::string line = buf_.substr(0, nl);
                buf_.erase(0, nl + 1);
                return line;
            }
            if (!fill(fd, deadline)) return std::nullopt;
        }
    }

    /// Whether the stream ends (or is reset) before kDeadline; what arrives before that is
    /// dropped if `discard`, else it means "no".
    bool ends(int fd, bool discard) {
        const auto deadline = Clock::now() + kDeadline;
        if (!discard && !buf_.empty()) return false;
        for (;;) {
            const std::size_t had = buf_.size();
            if (!fill(fd, deadline)) return eof_;
            if (!discard && buf_.size() > had) return false;
            buf_.clear();
        }
    }

private:
    /// Reads what is there (waiting for it); false at end of stream (eof_ set), on an error
    /// (a reset counts as the end) or at `deadline`.
    bool fill(int fd, Clock::time_point deadline) {
        for (;;) {
            pollfd p{fd, POLLIN, 0};
            if (::poll(&p, 1, ms_left(deadline)) <= 0) return false;
            char chunk[65536];
            const ssize_t n = ::read(fd, chunk, sizeof chunk);
            if (n > 0) {
                buf_.append(chunk, static_cast<std::size_t>(n));
                return true;
            }
            if (n == 0 || errno == ECONNRESET) {
                eof_ = true;
                return false;
            }
            if (errno != EAGAIN && errno != EINTR) return false;
        }
    }

    std::string buf_;
    bool eof_ = false;
};

/// A chat client on a plain socket.
class Chat {
public:
    explicit Chat(std::uint16_t port) : client_(port) {}

    /// Sends "JOIN <room>" and returns the answer line ("<none>" if none came).
    std::string join(const std::string& room) {
        send("JOIN " + room + "\n");
        return line().value_or("<none>");
    }

    /// Sends all of `text`, waiting while the socket is full.
    void send(const std::string& text) {
        const auto deadline = Clock::now() + kDeadline;
        for (std::size_t at = 0; at < text.size();) {
            const ssize_t n = ::send(client_.fd(), text.data() + at, text.size() - at, MSG_NOSIGNAL);
            if (n > 0) {
                at += static_cast<std::size_t>(n);
                continue;
            }
            REQUIRE_MESSAGE((errno == EAGAIN || errno == EINTR), "send: " << std::strerror(errno));
            pollfd p{client_.fd(), POLLOUT, 0};
            REQUIRE_MESSAGE(::poll(&p, 1, ms_left(deadline)) > 0, "the socket stayed full");
        }
    }

    std::optional<std::string> line() { return lines_.next(client_.fd()); }

    /// True if the server closes the connection: nothing more arrives but the end (or, with
    /// `discard`, whatever arrives first is dropped).
    bool sees_end(bool discard = false) { return lines_.ends(client_.fd(), discard); }

private:
    child::Client client_;
    LineReader lines_;
};

/// `nc -N 127.0.0.1 PORT` with pipes for its standard input and output (its standard error
/// goes to ours).
class NcSession {
public:
    NcSession(const char* nc, std::uint16_t port) {
        int in[2], out[2];
        REQUIRE(::pipe2(in, O_CLOEXEC) == 0);
        REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
        const std::string port_text = std::to_string(port);
        // -N: shut the socket down for writing at the end of the input (netcat-openbsd).
        const char* argv[] = {nc, "-N", "127.0.0.1", port_text.c_str(), nullptr};
        const pid_t parent = ::getpid();
        pid_ = ::fork();
        REQUIRE(pid_ >= 0);
        if (pid_ == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent) ::_exit(127);
            ::dup2(in[0], STDIN_FILENO);  // dup2 clears close-on-exec
            ::dup2(out[1], STDOUT_FILENO);
            ::execv(nc, const_cast<char* const*>(argv));
            ::_exit(127);
        }
        ::close(in[0]);
        ::close(out[1]);
        stdin_ = in[1];
        stdout_ = out[0];
    }
    NcSession(const NcSession&) = delete;
    NcSession& operator=(const NcSession&) = delete;
    ~NcSession() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            int status = 0;
            ::waitpid(pid_, &status, 0);
        }
        if (stdin_ >= 0) ::close(stdin_);
        if (stdout_ >= 0) ::close(stdout_);
    }

    /// What the user types.
    void write(const std::string& text) {
        REQUIRE(::write(stdin_, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    }

    /// The next line nc prints.
    std::optional<std::string> line() { return lines_.next(stdout_); }

    /// Ends its input and waits (up to kDeadline) for it to exit; its exit status, or -1 if it
    /// did not exit (then it is killed).
    int finish() {
        ::close(std::exchange(stdin_, -1));
        const auto deadline = Clock::now() + kDeadline;
        for (;;) {
            int status = 0;
            const pid_t r = ::waitpid(pid_, &status, WNOHANG);
            if (r == pid_) {
                pid_ = -1;
                return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            }
            if (Clock::now() > deadline) return -1;
            ::usleep(1000);  // polling a child's exit: there is no descriptor to wait on
        }
    }

private:
    pid_t pid_ = -1;
    int stdin_ = -1;
    int stdout_ = -1;
    LineReader lines_;
};

}  // namespace eddy::test::chat
