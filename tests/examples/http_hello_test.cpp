// tests/examples/http_hello_test.cpp: runs examples/http_hello as a child process and talks
// HTTP/1.1 to it over plain POSIX sockets (no eddy on this side), then drives it with wrk
// (Debian `wrk`), a real client, for one second.
//
// Checked: keep-alive (two requests on one connection), pipelining (three requests in one
// send, three answers in order), HEAD (no body), a body announced by Content-Length skipped,
// 404 and 405, HTTP/1.0 and "Connection: close" closing after the answer, and bad input
// answered and closed: a malformed request line (400), an over-long header line and too many
// headers (431), a chunked body (501), ambiguous framing (400: two differing Content-Length
// headers, a Content-Length that is not a plain decimal or past 2^64, whitespace before a
// header's colon, a folded header), a Content-Length over 1 MiB (413), each answered without
// waiting for a body; a repeated Content-Length of one value taken as one; requests split
// into 1-byte sends. wrk: every answer 2xx,
// no socket error. Then SIGTERM: exit status 0 and nothing on stderr.
// The drain on SIGTERM/SIGINT: with half a request sent, the "draining" line comes, a new
// connection is refused (ECONNREFUSED), the rest of the request gets its whole answer (with
// "Connection: close"), the connection closes and the server exits 0; keep-alive connections
// idle between requests are closed; a request never finished is cancelled at
// --drain-timeout 200 and counted as such on the last line; a bad --drain-timeout exits 2.
// The server binary comes from EDDY_HTTP_HELLO, wrk from EDDY_WRK (the test is skipped
// without it); both are set by tests/meson.build.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "../support/child_process.hpp"
#include "../support/line_client.hpp"

namespace {

using eddy::test::child::Client;
using eddy::test::child::Clock;
using eddy::test::child::Exit;
using eddy::test::child::kDeadline;
using eddy::test::child::ms_left;

const eddy::test::child::Program kHttpHello{"http_hello", "EDDY_HTTP_HELLO", {"EDDY_PORT=", "EDDY_WORKERS="}};


struct Response {
    std::string status;  // "200 OK"
    std::string headers;
    std::string body;
};

/// Takes the complete responses off the front of `got`.
std::vector<Response> take_responses(std::string& got) {
    std::vector<Response> out;
    for (;;) {
        const std::size_t end = got.find("\r\n\r\n");
        if (end == std::string::npos) return out;
        const std::string head = got.substr(0, end + 2);
        const std::size_t cl = head.find("Content-Length: ");
        REQUIRE(cl != std::string::npos);
        const std::size_t length = std::stoul(head.substr(cl + 16));
        const std::size_t total = end + 4 + length;
        if (got.size() < total) return out;
        Response r;
        r.status = head.substr(9, head.find("\r\n") - 9);
        r.headers = head;
        r.body = got.substr(end + 4, total - end - 4);
        out.push_back(r);
        got.erase(0, total);
    }
}

/// Sends `text` (in 1-byte pieces when `bytewise`), then reads until `count` responses came
/// or, when `closed` is given, until the server closes (`closed` says whether it did).
/// Not for HEAD (its answer announces a body it does not carry).
std::vector<Response> send_and_read(Client& c, const std::string& text, std::size_t count, bool* closed = nullptr,
                                    bool bytewise = false) {
    if (bytewise) {
        for (char ch : text) REQUIRE(::send(c.fd(), &ch, 1, MSG_NOSIGNAL) == 1);
    } else {
        REQUIRE(::send(c.fd(), text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size()));
    }
    std::string got;
    std::vector<Response> out;
    const auto deadline = Clock::now() + kDeadline;
    bool eof = false;
    while (out.size() < count || closed != nullptr) {
        pollfd p{c.fd(), POLLIN, 0};
        if (::poll(&p, 1, ms_left(deadline)) <= 0) break;
        char buf[4096];
        const ssize_t n = ::recv(c.fd(), buf, sizeof buf, 0);
        if (n > 0) {
            got.append(buf, static_cast<std::size_t>(n));
            for (Response& r : take_responses(got)) out.push_back(std::move(r));
        } else if (n == 0) {
            eof = true;
            break;
        } else if (errno != EAGAIN && errno != EINTR) {
            eof = true;  // a reset also ends the connection
            break;
        }
        if (closed == nullptr && out.size() >= count) break;
    }
    if (closed != nullptr) *closed = eof;
    return out;
}

std::string get(const std::string& target, const std::string& extra = "") {
    return "GET " + target + " HTTP/1.1\r\nHost: localhost\r\n" + extra + "\r\n";
}

}  // namespace

TEST_CASE("http_hello: keep-alive, pipelining, HEAD, bodies, 404/405, closing, bad input; then wrk") {
    eddy::test::child::ServerProcess server(kHttpHello);
    const std::uint16_t port = server.port();

    SUBCASE("two requests on one connection, then three pipelined in one send") {
        Client c(port);
        for (int i = 0; i < 2; ++i) {
            auto r = send_and_read(c, get("/"), 1);
            REQUIRE(r.size() == 1);
            CHECK(r[0].status == "200 OK");
            CHECK(r[0].body == "Hello, world!");
        }
        auto r = send_and_read(c, get("/") + get("/missing") + get("/"), 3);
        REQUIRE(r.size() == 3);
        CHECK(r[0].status == "200 OK");
        CHECK(r[1].status == "404 Not Found");
        CHECK(r[2].status == "200 OK");
    }
    SUBCASE("a request sent one byte at a time, a POST with a body, HEAD") {
        Client c(port);
        auto r = send_and_read(c, get("/"), 1, nullptr, true);
        REQUIRE(r.size() == 1);
        CHECK(r[0].body == "Hello, world!");
        r = send_and_read(c, "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello" + get("/"), 2);
        REQUIRE(r.size() == 2);
        CHECK(r[0].status == "405 Method Not Allowed");
        CHECK(r[1].status == "200 OK");
        // HEAD, then GET: the HEAD answer's head is followed at once by the GET's answer.
        const std::string head_answer =
            "HTTP/1.1 200 OK\r\nServer: eddy\r\nContent-Type: text/plain\r\n"
            "Content-Length: 13\r\n\r\n";
        const std::string expected = head_answer + head_answer + "Hello, world!";
        CHECK(c.request_bytes("HEAD / HTTP/1.1\r\n\r\n" + get("/"), expected.size()) == expected);
        // Content-Length twice with one value is one Content-Length (RFC 9110 section 8.6).
        r = send_and_read(c, "POST / HTTP/1.1\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\nhello" + get("/"), 2);
        REQUIRE(r.size() == 2);
        CHECK(r[0].status == "405 Method Not Allowed");
        CHECK(r[1].status == "200 OK");
    }
    SUBCASE("HTTP/1.0 and Connection: close end the connection after the answer") {
        for (const std::string& request : {std::string("GET / HTTP/1.0\r\n\r\n"), get("/", "Connection: close\r\n")}) {
            CAPTURE(request);
            Client c(port);
            bool closed = false;
            auto r = send_and_read(c, request, 1, &closed);
            REQUIRE(r.size() == 1);
            CHECK(r[0].body == "Hello, world!");
            CHECK(r[0].headers.find("Connection: close") != std::string::npos);
            CHECK(closed);
        }
    }
    SUBCASE("bad input: an answer, then the connection closes") {
        struct Case {
            std::string request, status;
        };
        std::string many_headers = "GET / HTTP/1.1\r\n";
        for (int i = 0; i < 101; ++i) many_headers += "X-" + std::to_string(i) + ": y\r\n";
        const Case cases[] = {
            {"NONSENSE\r\n\r\n", "400 Bad Request"},
            {"GET / HTTP/2.0\r\n\r\n", "400 Bad Request"},
            {"GET / HTTP/1.1\r\nno colon here\r\n\r\n", "400 Bad Request"},
            {"GET / HTTP/1.1\r\nContent-Length: ten\r\n\r\n", "400 Bad Request"},
            {"GET / HTTP/1.1\r\nX-Long: " + std::string(9000, 'a') + "\r\n\r\n", "431 Request Header Fields Too Large"},
            {many_headers + "\r\n", "431 Request Header Fields Too Large"},
            {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", "501 Not Implemented"},
            // Framing two parties could read differently (RFC 9112 section 6.3): answered at
            // once, without waiting for a body.
            {"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello", "400 Bad Request"},
            {"POST / HTTP/1.1\r\nContent-Length: 5, 6\r\n\r\nhello", "400 Bad Request"},
            {"POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\nhello", "400 Bad Request"},
            {"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", "400 Bad Request"},
            {"POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\nhello", "400 Bad Request"},
            {"POST / HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n", "400 Bad Request"},
            {"POST / HTTP/1.1\r\nContent-Length:\r\n\r\n", "400 Bad Request"},
            {"POST / HTTP/1.1\r\nContent-Length: 18446744073709551616\r\n\r\n", "400 Bad Request"},  // 2^64
            {"POST / HTTP/1.1\r\nContent-Length : 5\r\n\r\nhello", "400 Bad Request"},
            {"POST / HTTP/1.1\r\nHost: x\r\n Content-Length: 5\r\n\r\nhello", "400 Bad Request"},  // folded
            {"POST / HTTP/1.1\r\nContent-Length: 1048577\r\n\r\n", "413 Content Too Large"},       // 1 MiB + 1
            {"POST / HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\n", "413 Content Too Large"},
        };
        for (const Case& k : cases) {
            CAPTURE(k.status);
            Client c(port);
            bool closed = false;
            auto r = send_and_read(c, k.request, 1, &closed);
            REQUIRE(r.size() == 1);
            CHECK(r[0].status == k.status);
            CHECK(closed);
        }
        // The server is still there.
        Client c(port);
        CHECK(send_and_read(c, get("/"), 1).size() == 1);
    }
    SUBCASE("wrk: one second of keep-alive load, every answer 2xx") {
        const char* wrk = std::getenv("EDDY_WRK");
        if (wrk == nullptr || *wrk == '\0') {
            MESSAGE("wrk not installed: skipped");
            return;
        }
        const eddy::test::child::Program kWrk{"wrk", "EDDY_WRK", {}};
        eddy::test::child::ChildProcess load(
            kWrk, {"-t1", "-c8", "-d1s", "http://127.0.0.1:" + std::to_string(port) + "/"}, {});
        const std::optional<Exit> e = load.wait_exit();
        REQUIRE(e.has_value());
        CHECK(e->status == 0);
        const std::string out = load.rest_of_output();
        CAPTURE(out);
        CHECK(out.find(" requests in ") != std::string::npos);
        CHECK(out.find("Non-2xx") == std::string::npos);
        CHECK(out.find("Socket errors") == std::string::npos);
    }

    const Exit e = server.stop();
    CHECK(e.status == 0);
    CHECK(e.err == "");
}

namespace {

/// The errno of a blocking connect to 127.0.0.1:`port` (0 when it connects).
int connect_error(std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int error = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 ? 0 : errno;
    ::close(fd);
    return error;
}

/// Sends all of `text` in one send.
void send_text(Client& c, const std::string& text) {
    REQUIRE(::send(c.fd(), text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size()));
}

/// A connection the server has accepted and served once (so a SIGTERM finds it open), then
/// left with the first half of a request (no blank line yet) when `half` is set.
Client served_connection(std::uint16_t port, bool half) {
    Client c(port);
    const auto r = send_and_read(c, get("/"), 1);
    REQUIRE(r.size() == 1);
    if (half) send_text(c, "GET / HTTP/1.1\r\nHost: x\r\n");
    return c;
}

}  // namespace

TEST_CASE("http_hello: SIGTERM drains: a request begun is answered, idle connections close") {
    SUBCASE("half a request: new connections refused, the request answered, then the exit") {
        eddy::test::child::ServerProcess server(kHttpHello);
        const std::uint16_t port = server.port();
        Client c = served_connection(port, true);
        server.signal(SIGTERM);
        const std::optional<std::string> draining = server.read_through_line("http_hello: SIGTERM, draining");
        REQUIRE(draining.has_value());
        CHECK(*draining == "http_hello: SIGTERM, draining 1 connection\n");
        CHECK(connect_error(port) == ECONNREFUSED);  // the listener closed before that line
        bool closed = false;
        const auto r = send_and_read(c, "\r\n", 1, &closed);
        REQUIRE(r.size() == 1);
        CHECK(r[0].status == "200 OK");
        CHECK(r[0].body == "Hello, world!");
        CHECK(r[0].headers.find("Connection: close") != std::string::npos);
        CHECK(closed);
        CHECK(server.wait_clean_exit() == "http_hello: SIGTERM, shut down; 1 connection closed\n");
    }
    SUBCASE("keep-alive connections idle between requests are closed, and the server exits") {
        eddy::test::child::ServerProcess server(kHttpHello);
        const std::uint16_t port = server.port();
        Client a = served_connection(port, false);
        Client b = served_connection(port, false);
        server.signal(SIGINT);
        CHECK(a.sees_end_of_stream());
        CHECK(b.sees_end_of_stream());
        CHECK(server.wait_clean_exit() ==
              "http_hello: SIGINT, draining 2 connections\nhttp_hello: SIGINT, shut down; 2 connections closed\n");
    }
    SUBCASE("a request never finished is cancelled at --drain-timeout") {
        eddy::test::child::ServerProcess server(kHttpHello,
                                                {"--port", "0", "--workers", "2", "--drain-timeout", "200"});
        const std::uint16_t port = server.port();
        Client c = served_connection(port, true);
        server.signal(SIGTERM);
        // Exits by itself: wait_exit's bound (kDeadline, 20 s) is 100 times the drain timeout.
        CHECK(server.wait_clean_exit() ==
              "http_hello: SIGTERM, draining 1 connection\n"
              "http_hello: SIGTERM, shut down; 1 connection closed (1 cancelled at the deadline)\n");
        CHECK(c.sees_end_of_stream(true));
    }
    SUBCASE("a bad --drain-timeout is refused with exit status 2") {
        for (const char* bad : {"-1", "ten", "3600001", ""}) {
            CAPTURE(bad);
            eddy::test::child::ChildProcess server(kHttpHello, {"--port", "0", "--drain-timeout", bad}, {});
            const std::optional<Exit> e = server.wait_exit();
            REQUIRE(e.has_value());
            CHECK(e->status == 2);
            CHECK(e->err.find("http_hello: --drain-timeout must be a number of milliseconds from 0 to 3600000") == 0);
        }
    }
}
