// tests/examples/chat_server_test.cpp: runs examples/chat_server as a child process and speaks
// its line protocol over plain POSIX sockets (no eddy on this side), then through two real
// `nc` sessions (Debian netcat-openbsd) and under benchmarks/pubsub_load.
//
// Checked: two rooms, each member getting every line of its room (its own included, its
// acknowledgement) in one order for the whole room and nothing of the other room; bad input
// answered and closed (a first line that is not JOIN, bad room names, a line over 4 KiB before
// and after the JOIN, the 4 KiB line itself accepted); a client that never reads while others
// talk is dropped as too slow, counted, and the healthy members get every line (counted in
// lines, never in time); SIGTERM prints the stats line with the exact counts and exits 0;
// two nc sessions chat in one room; pubsub_load with small numbers reports dropped=0 errors=0
// and the exact number of lines delivered, which the server's own counters confirm.
// The binaries come from EDDY_CHAT_SERVER, EDDY_PUBSUB_LOAD and EDDY_NC (the nc case is
// skipped without it), set by tests/meson.build. Every wait is bounded by kDeadline.
#include <doctest/doctest.h>

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "../support/child_process.hpp"
#include "../support/line_client.hpp"
#include "chat_session.hpp"

namespace {

using eddy::test::child::ChildProcess;
using eddy::test::child::Exit;
using eddy::test::child::Program;
using eddy::test::child::ServerProcess;
using eddy::test::chat::Chat;
using eddy::test::chat::NcSession;

const Program kChatServer{"chat_server", "EDDY_CHAT_SERVER", {"EDDY_PORT=", "EDDY_WORKERS="}};
const Program kPubsubLoad{"pubsub_load", "EDDY_PUBSUB_LOAD", {}};

/// The key=value pairs of a "chat_server stats: ..." line.
std::map<std::string, std::string> stats_of(const std::string& line) {
    std::map<std::string, std::string> out;
    const std::size_t at = line.find("stats:");
    REQUIRE(at != std::string::npos);
    std::size_t i = at + 6;
    while (i < line.size()) {
        const std::size_t end = std::min(line.find_first_of(" \n", i), line.size());
        const std::string word = line.substr(i, end - i);
        if (const std::size_t eq = word.find('='); eq != std::string::npos)
            out[word.substr(0, eq)] = word.substr(eq + 1);
        i = end + 1;
    }
    return out;
}

/// SIGUSR1 and the stats line it makes the server print.
std::map<std::string, std::string> ask_stats(ChildProcess& server) {
    server.signal(SIGUSR1);
    const std::optional<std::string> text = server.read_through_line("chat_server stats:");
    REQUIRE(text.has_value());
    return stats_of(text->substr(text->rfind("chat_server stats:")));
}

/// "<who> <i> " padded with '.' to `size` bytes, without the "\n".
std::string numbered_line(const std::string& who, int i, std::size_t size = 0) {
    std::string line = who;
    line.append(" ").append(std::to_string(i)).append(" ");
    if (line.size() < size) line.append(size - line.size(), '.');
    return line;
}

}  // namespace

TEST_CASE("chat_server: rooms, order, the sender's own line, nothing across rooms") {
    ServerProcess server(kChatServer);
    const std::uint16_t port = server.port();
    Chat a1(port), a2(port), b1(port);
    CHECK(a1.join("lobby") == "JOINED lobby");
    CHECK(a2.join("lobby") == "JOINED lobby");
    CHECK(b1.join("42") == "JOINED 42");

    // Both members of "lobby" talk at once; each sees all 200 lines, each sender's in order,
    // and both see the same order.
    constexpr int kEach = 100;
    for (int i = 0; i < kEach; ++i) {
        a1.send(numbered_line("a1", i) + "\n");
        a2.send(numbered_line("a2", i) + "\n");
    }
    std::vector<std::string> seen1, seen2;
    for (int i = 0; i < 2 * kEach; ++i) {
        const std::optional<std::string> l1 = a1.line(), l2 = a2.line();
        REQUIRE(l1.has_value());
        REQUIRE(l2.has_value());
        seen1.push_back(*l1);
        seen2.push_back(*l2);
    }
    CHECK(seen1 == seen2);
    int next_a1 = 0, next_a2 = 0;
    for (const std::string& l : seen1) {
        if (l.rfind("a1 ", 0) == 0) CHECK(l == numbered_line("a1", next_a1++));
        else CHECK(l == numbered_line("a2", next_a2++));
    }
    CHECK(next_a1 == kEach);
    CHECK(next_a2 == kEach);

    // The other room: b1 gets its own lines back and nothing of "lobby"'s (a shared channel
    // would have queued those before its marker).
    b1.send("b1 talks\nb1 marker\n");
    CHECK(b1.line() == "b1 talks");
    CHECK(b1.line() == "b1 marker");
    a1.send("a1 last\n");
    CHECK(a1.line() == "a1 last");
    CHECK(a2.line() == "a1 last");

    const std::map<std::string, std::string> stats = ask_stats(server);
    CHECK(stats.at("clients") == "3");
    CHECK(stats.at("dropped") == "0");
    CHECK(stats.at("lines_in") == std::to_string(2 * kEach + 3));
    const Exit e = server.stop();
    CHECK(e.status == 0);
    CHECK(e.err == "");
}

TEST_CASE("chat_server: bad input is answered, then the connection closes") {
    ServerProcess server(kChatServer);
    const std::uint16_t port = server.port();
    const std::string kNotJoin = "ERR expected JOIN <room>";
    const std::string kTooLong = "ERR line too long";
    struct Case {
        std::string first_line, answer;
    };
    const Case cases[] = {
        {"HELLO", kNotJoin},
        {"join lobby", kNotJoin},
        {"JOIN ", kNotJoin},
        {"JOIN two words", kNotJoin},
        {"JOIN no/slash", kNotJoin},
        {"JOIN " + std::string(65, 'r'), kNotJoin},
        {"JOIN " + std::string(5000, 'r'), kTooLong},
    };
    for (const Case& k : cases) {
        CAPTURE(k.first_line.substr(0, 40));
        Chat c(port);
        c.send(k.first_line + "\n");
        CHECK(c.line() == k.answer);
        CHECK(c.sees_end());
    }
    SUBCASE("a line over 4 KiB after the JOIN: the room gets the lines before it") {
        Chat c(port), other(port);
        CHECK(c.join("limits") == "JOINED limits");
        CHECK(other.join("limits") == "JOINED limits");
        const std::string longest(4095, 'x');  // 4096 bytes with its "\n": the limit itself
        c.send("before\n" + longest + "\n" + std::string(4096, 'y') + "\nnever sent\n");
        // The answer follows what was queued for c by then: a prefix of its own two lines.
        const std::vector<std::string> own = {"before", longest};
        std::size_t got = 0;
        std::optional<std::string> l;
        while ((l = c.line()) && got < own.size() && *l == own[got]) ++got;
        CHECK(l == kTooLong);
        CHECK(c.sees_end());
        CHECK(other.line() == "before");
        CHECK(other.line() == longest);
        other.send("still here\n");
        CHECK(other.line() == "still here");  // nothing of the long line reached the room
    }
    const Exit e = server.stop();
    CHECK(e.status == 0);
    CHECK(e.err == "");
}

TEST_CASE("chat_server: a client that never reads is dropped; the others get every line") {
    ServerProcess server(kChatServer);
    const std::uint16_t port = server.port();
    Chat slow(port), h1(port), h2(port);
    CHECK(slow.join("busy") == "JOINED busy");
    CHECK(h1.join("busy") == "JOINED busy");
    CHECK(h2.join("busy") == "JOINED busy");
    // h1 talks in lines of 4 KiB and waits until both healthy members have each line, so they
    // never fall behind; `slow` reads nothing. Its outbox (1024 lines) fills once the kernel's
    // socket buffers between it and the server are full: a few MiB, a few thousand lines.
    // Go on until the server says it dropped a client (at most 20000 lines, 80 MiB).
    constexpr int kMaxLines = 20000;
    int sent = 0;
    bool dropped = false;
    while (!dropped && sent < kMaxLines) {
        for (int n = 0; n < 200; ++n, ++sent) {
            const std::string line = numbered_line("h1", sent, 4000);
            h1.send(line + "\n");
            REQUIRE(h1.line() == line);
            REQUIRE(h2.line() == line);
        }
        dropped = ask_stats(server).at("dropped") == "1";
    }
    REQUIRE(dropped);
    MESSAGE("dropped after " << sent << " lines of 4000 bytes");
    // The healthy ones go on as before.
    for (int n = 0; n < 100; ++n, ++sent) {
        const std::string line = numbered_line("h1", sent, 4000);
        h1.send(line + "\n");
        CHECK(h1.line() == line);
        CHECK(h2.line() == line);
    }
    h2.send("h2 done\n");
    CHECK(h1.line() == "h2 done");
    CHECK(h2.line() == "h2 done");
    // The slow client's connection was closed: it finds the end after what had reached it.
    CHECK(slow.sees_end(true));
    const std::map<std::string, std::string> stats = ask_stats(server);
    CHECK(stats.at("dropped") == "1");
    CHECK(stats.at("lagged") == "0");  // its outbox overflowed; the room's ring never did
    CHECK(stats.at("lines_in") == std::to_string(sent + 1));
    const Exit e = server.stop();
    CHECK(e.status == 0);
    CHECK(e.err == "");
}

TEST_CASE("chat_server: SIGTERM prints the stats line with the exact counts and exits 0") {
    ServerProcess server(kChatServer);
    const std::uint16_t port = server.port();
    {
        Chat bad(port);
        bad.send("HELLO\n");
        CHECK(bad.line() == "ERR expected JOIN <room>");
    }
    Chat a(port), b(port);
    CHECK(a.join("7") == "JOINED 7");
    CHECK(b.join("7") == "JOINED 7");
    a.send("one\ntwo\n\nthree\n");  // the empty line is ignored
    for (const char* want : {"one", "two", "three"}) {
        CHECK(a.line() == want);
        CHECK(b.line() == want);
    }
    server.signal(SIGTERM);
    const std::optional<Exit> e = server.wait_exit();
    REQUIRE(e.has_value());
    CHECK(e->status == 0);
    CHECK(e->err == "");
    const std::string out = server.rest_of_output();
    CAPTURE(out);
    CHECK(out.find("chat_server: SIGTERM, shut down; 2 connections closed\n") != std::string::npos);
    const std::size_t at = out.rfind("chat_server stats:");
    REQUIRE(at != std::string::npos);
    CHECK(out.find('\n', at) == out.size() - 1);  // the last line
    const std::map<std::string, std::string> stats = stats_of(out.substr(at));
    CHECK(stats.at("clients") == "3");
    CHECK(stats.at("dropped") == "0");
    CHECK(stats.at("lines_in") == "3");
    CHECK(stats.at("lines_out") == "6");
    CHECK(stats.at("lagged") == "0");
    CHECK(stats.at("workers") == "2");
    CHECK(stats.count("polled") == 1);
}

TEST_CASE("chat_server: two nc sessions chat in one room") {
    const char* nc = std::getenv("EDDY_NC");
    if (nc == nullptr || *nc == '\0') {
        MESSAGE("nc (netcat-openbsd) not installed: skipped");
        return;
    }
    ServerProcess server(kChatServer);
    const std::uint16_t port = server.port();
    NcSession ann(nc, port), bob(nc, port);
    ann.write("JOIN tea\n");
    CHECK(ann.line() == "JOINED tea");
    bob.write("JOIN tea\n");
    CHECK(bob.line() == "JOINED tea");
    ann.write("hello from ann\n");
    CHECK(ann.line() == "hello from ann");
    CHECK(bob.line() == "hello from ann");
    bob.write("hi ann\r\n");  // a "\r" before the "\n" is dropped
    CHECK(ann.line() == "hi ann");
    CHECK(bob.line() == "hi ann");
    // ann leaves: end of her input; nc shuts its socket down (-N), the server closes, nc exits.
    CHECK(ann.finish() == 0);
    bob.write("anyone?\n");
    CHECK(bob.line() == "anyone?");
    CHECK(bob.finish() == 0);
    const Exit e = server.stop();
    CHECK(e.status == 0);
    CHECK(e.err == "");
}

TEST_CASE("chat_server: pubsub_load with small numbers: every line, in order, nobody dropped") {
    ServerProcess server(kChatServer);
    const std::uint16_t port = server.port();
    // 20 clients in 4 rooms of 5, 50 lines each, 2 in flight: 1000 lines in, each delivered to
    // the 5 members of its room.
    ChildProcess load(kPubsubLoad,
                      {"--port", std::to_string(port), "--clients", "20", "--room-size", "5", "--lines", "50",
                       "--window", "2", "--runtime", "eddy", "--workers", "2"},
                      {});
    const std::optional<Exit> e = load.wait_exit();
    REQUIRE(e.has_value());
    CHECK(e->status == 0);
    const std::string out = load.rest_of_output();
    CAPTURE(out);
    CAPTURE(e->err);
    CHECK(out.rfind("bench=fanout_pubsub runtime=eddy workers=2 ops=5000 ", 0) == 0);
    CHECK(out.find(" room_size=5 clients=20 window=2 ") != std::string::npos);
    CHECK(out.find(" lines_sent=1000 sent_min=50 sent_max=50 ") != std::string::npos);
    CHECK(out.find(" dropped=0 errors=0 offered=0\n") != std::string::npos);
    server.signal(SIGTERM);
    const std::optional<Exit> s = server.wait_exit();
    REQUIRE(s.has_value());
    CHECK(s->status == 0);
    const std::string text = server.rest_of_output();
    const std::size_t at = text.rfind("chat_server stats:");
    REQUIRE(at != std::string::npos);
    const std::map<std::string, std::string> stats = stats_of(text.substr(at));
    CHECK(stats.at("clients") == "20");
    CHECK(stats.at("lines_in") == "1000");
    CHECK(stats.at("lines_out") == "5000");
    CHECK(stats.at("dropped") == "0");
}
