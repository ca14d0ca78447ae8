// tests/support/line_client.hpp: a plain POSIX TCP client for the tests in tests/examples/
// (no eddy on this side): connects to a child process's loopback port, sends, reads lines
// and waits for end of stream, each wait a poll() bounded by kDeadline.
#pragma once

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "child_process.hpp"  // kDeadline, Clock, ms_left

namespace eddy::test::child {

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
    Client& operator=(Client&& o) noexcept {
        std::swap(fd_, o.fd_);  // o closes what we held
        return *this;
    }
    ~Client() {
        if (fd_ >= 0) ::close(fd_);
    }
    int fd() const { return fd_; }

    /// Sends `text` (small: one send) and returns what comes back once it holds `lines` line
    /// ends (or whatever came before kDeadline or end of stream).
    std::string request(const std::string& text, std::size_t lines) {
        send_all(text);
        return receive_until([lines](const std::string& got) {
            return static_cast<std::size_t>(std::count(got.begin(), got.end(), '\n')) >= lines;
        });
    }

    /// Sends `text` (small: one send) and returns what comes back once it holds `size` bytes
    /// (or whatever came before kDeadline or end of stream).
    std::string request_bytes(const std::string& text, std::size_t size) {
        send_all(text);
        return receive_until([size](const std::string& got) { return got.size() >= size; });
    }

    /// Closes with a reset (RST) instead of an orderly FIN: the peer's next read or write on
    /// this connection fails with ECONNRESET or EPIPE.
    void reset() {
        linger l{1, 0};
        REQUIRE(::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l) == 0);
        ::close(std::exchange(fd_, -1));
    }

    /// Waits until the peer closes its side: true if recv returns 0 (end of stream) before
    /// kDeadline with no further data, or, when `reset_too`, fails with ECONNRESET (a peer
    /// that closes with our bytes still unread in its buffer sends a reset).
    bool sees_end_of_stream(bool reset_too = false) {
        const auto deadline = Clock::now() + kDeadline;
        for (;;) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, ms_left(deadline)) <= 0) return false;
            char c;
            const ssize_t n = ::recv(fd_, &c, 1, 0);
            if (n == 0 || (n < 0 && reset_too && errno == ECONNRESET)) return true;
            if (n > 0 || (errno != EAGAIN && errno != EINTR)) return false;
        }
    }

private:
    void send_all(const std::string& text) {
        REQUIRE(::send(fd_, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size()));
    }
    /// Receives until `done(what came)`, kDeadline or end of stream.
    template <class Done>
    std::string receive_until(Done done) {
        std::string got;
        const auto deadline = Clock::now() + kDeadline;
        while (!done(got)) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, ms_left(deadline)) <= 0) break;
            char buf[4096];
            const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n > 0) got.append(buf, static_cast<std::size_t>(n));
            else if (n == 0 || (errno != EAGAIN && errno != EINTR)) break;
        }
        return got;
    }

    int fd_ = -1;
};

}  // namespace eddy::test::child
