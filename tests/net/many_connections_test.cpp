// tests/net/many_connections_test.cpp: 1,000 concurrent connections to one listener. Each
// client task connects, sends its own message and reads the echo back; every client must
// succeed with exactly its own bytes.
//
// Descriptors: 1,000 connections are 2,000 descriptors in this one process, so the soft
// RLIMIT_NOFILE is raised towards the hard limit first (the test is skipped, not failed, when
// the hard limit is too low). The listen backlog is asked for 4,096 (the kernel caps it at
// net.core.somaxconn): an overflowing accept queue would only slow the test down (dropped
// SYNs are retried after a second), not fail it.
#include <doctest/doctest.h>

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <eddy/net/socket_addr.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/net/tcp_stream.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/tasks/task.hpp>

#include "support/net_helpers.hpp"

using eddy::JoinHandle;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::net::SocketAddr;
using eddy::net::TcpListener;
using eddy::net::TcpStream;
using eddy::test::echo;
using eddy::test::read_to_end;
using eddy::test::run;

namespace {

constexpr int kClients = 1000;

/// Client `id`'s message: distinct text, lengths from a few bytes to about 9 KiB (larger
/// than the server's 4 KiB buffer, so some echoes take several reads and writes).
std::string message_for(int id) {
    std::string m = "client " + std::to_string(id) + ":";
    const std::size_t extra = static_cast<std::size_t>(id % 7 == 0 ? 9000 + id : id % 50);
    for (std::size_t i = 0; i < extra; ++i) m.push_back(static_cast<char>('a' + (id + i) % 26));
    return m;
}

/// Accepts exactly `n` connections, one echo task each; returns when all echoes are done.
Task<int> server(TcpListener& listener, int n) {
    std::vector<JoinHandle<void>> echoes;
    echoes.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) echoes.push_back(eddy::spawn(echo(co_await listener.accept())));
    int served = 0;
    for (auto& h : echoes) {
        co_await std::move(h);
        ++served;
    }
    co_return served;
}

/// Connects, sends the message, half-closes, reads the echo to the end; true if it matches.
Task<bool> client(SocketAddr addr, int id) {
    const std::string msg = message_for(id);
    TcpStream s = co_await TcpStream::connect(addr);
    co_await s.write_all(msg);
    s.shutdown(TcpStream::Shutdown::kWrite);
    co_return co_await read_to_end(s) == msg;
}

Task<std::pair<int, std::vector<bool>>> session(TcpListener& listener) {
    auto srv = eddy::spawn(server(listener, kClients));
    std::vector<Task<bool>> clients;
    clients.reserve(kClients);
    for (int i = 0; i < kClients; ++i) clients.push_back(client(listener.local_address(), i));
    std::vector<bool> ok = co_await eddy::when_all(std::move(clients));
    const int served = co_await std::move(srv);
    co_return std::pair{served, std::move(ok)};
}

}  // namespace

TEST_CASE("1,000 concurrent connections each get their own echo back") {
    // Both ends of every connection plus the runtime's own and a margin.
    const rlim_t needed = 2 * kClients + 200;
    rlimit rl{};
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &rl) == 0);
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < needed) {
        if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < needed) {
            MESSAGE("the hard RLIMIT_NOFILE (" << rl.rlim_max << ") is below the " << needed
                                               << " descriptors this test needs: skipped");
            return;
        }
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? needed : rl.rlim_max;
        REQUIRE(::setrlimit(RLIMIT_NOFILE, &rl) == 0);
    }

    for (const SocketAddr& lo : eddy::test::loopbacks()) {
        CAPTURE(lo.to_string());
        auto listener = TcpListener::bind(lo, 4096);
        Runtime rt(RuntimeConfig{.workers = 2});
        const auto [served, ok] = run(rt, session(listener));
        CHECK(served == kClients);
        REQUIRE(ok.size() == static_cast<std::size_t>(kClients));
        const auto failed = std::count(ok.begin(), ok.end(), false);
        CHECK(failed == 0);
        if (failed != 0)
            for (int i = 0; i < kClients; ++i)
                if (!ok[static_cast<std::size_t>(i)]) FAIL_CHECK("client " << i << " got a wrong echo");
    }
}
