// tests/net/lookup_test.cpp: net::lookup_host and TcpStream::connect("host:port"):
//   - numeric addresses (IPv4, bracketed IPv6) give themselves and never reach the resolver
//     (eddy::detail::resolver_calls() does not move);
//   - "localhost:PORT" resolves (from /etc/hosts) and connects to a listener there;
//   - a name under the reserved .invalid domain is net::ResolveError naming the host, in the
//     "getaddrinfo" category;
//   - texts that are not host:port are std::invalid_argument;
//   - a refused connection to every address is net::ConnectError, listing every attempt with
//     ECONNREFUSED, its code ECONNREFUSED.
#include <doctest/doctest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <eddy/net/connect_error.hpp>
#include <eddy/net/lookup.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/net/tcp_stream.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/tasks/task.hpp>

#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::net::SocketAddr;
using eddy::test::run;

TEST_CASE("numeric addresses give themselves without the resolver") {
    Runtime rt(RuntimeConfig{.workers = 1});
    const std::uint64_t before = eddy::detail::resolver_calls();
    CHECK(run(rt, eddy::net::lookup_host("10.1.2.3:80")) == std::vector{SocketAddr::parse("10.1.2.3:80")});
    CHECK(run(rt, eddy::net::lookup_host("[::1]:8080")) == std::vector{SocketAddr::loopback_v6(8080)});
    CHECK(run(rt, eddy::net::lookup_host("127.0.0.1", 9)) == std::vector{SocketAddr::loopback_v4(9)});
    CHECK(run(rt, eddy::net::lookup_host("::1", 9)) == std::vector{SocketAddr::loopback_v6(9)});
    CHECK(eddy::detail::resolver_calls() == before);
}

TEST_CASE("localhost resolves and connect(\"localhost:PORT\") reaches a listener") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto listener = eddy::net::TcpListener::bind(SocketAddr::loopback_v4(0));
    const std::uint16_t port = listener.local_address().port();
    const std::uint64_t before = eddy::detail::resolver_calls();
    const auto addrs = run(rt, eddy::net::lookup_host("localhost:" + std::to_string(port)));
    CHECK(eddy::detail::resolver_calls() == before + 1);
    REQUIRE_FALSE(addrs.empty());
    for (const SocketAddr& a : addrs) CHECK(a.port() == port);
    CHECK(std::find(addrs.begin(), addrs.end(), SocketAddr::loopback_v4(port)) != addrs.end());
    const std::string got = run(rt, [&]() -> Task<std::string> {
        auto server_side = eddy::spawn([](eddy::net::TcpListener& l) -> Task<std::string> {
            auto s = co_await l.accept();
            co_return co_await eddy::test::read_to_end(s);
        }(listener));
        auto s = co_await eddy::net::TcpStream::connect("localhost:" + std::to_string(port));
        co_await s.write_all("by name");
        s.close();
        co_return co_await server_side;
    }());
    CHECK(got == "by name");
}

TEST_CASE("an unknown host is ResolveError naming it") {
    Runtime rt(RuntimeConfig{.workers = 1});
    for (bool connect : {false, true}) {
        CAPTURE(connect);
        try {
            if (connect) run(rt, eddy::net::TcpStream::connect("no-such-host.invalid:80"));
            else run(rt, eddy::net::lookup_host("no-such-host.invalid:80"));
            FAIL("no exception");
        } catch (const eddy::net::ResolveError& e) {
            CHECK(e.host() == "no-such-host.invalid");
            CHECK(std::string(e.what()).find("no-such-host.invalid") != std::string::npos);
            const bool resolver_said = e.code().category() == eddy::net::resolver_category();
            CHECK((resolver_said || e.code().category() == std::system_category()));
        }
    }
}

TEST_CASE("texts that are not host:port are invalid_argument") {
    Runtime rt(RuntimeConfig{.workers = 1});
    for (const char* text :
         {"localhost", "localhost:", "localhost:http", ":80", "host:65536", "::1:80", "[::1]80", "[::1:80"}) {
        CAPTURE(text);
        CHECK_THROWS_AS(run(rt, eddy::net::lookup_host(text)), std::invalid_argument);
        CHECK_THROWS_AS(run(rt, eddy::net::TcpStream::connect(std::string_view(text))), std::invalid_argument);
    }
    CHECK_THROWS_AS(run(rt, eddy::net::lookup_host("", 80)), std::invalid_argument);
}

TEST_CASE("every address refused: ConnectError lists each attempt") {
    Runtime rt(RuntimeConfig{.workers = 1});
    std::uint16_t port = 0;
    {
        auto l = eddy::net::TcpListener::bind(SocketAddr::loopback_v4(0));  // a port nobody listens on after this
        port = l.local_address().port();
    }
    try {
        run(rt, eddy::net::TcpStream::connect("localhost:" + std::to_string(port)));
        FAIL("no exception");
    } catch (const eddy::net::ConnectError& e) {
        CHECK(e.code() == std::errc::connection_refused);
        REQUIRE_FALSE(e.attempts().empty());
        for (const auto& a : e.attempts()) {
            CHECK(a.address.port() == port);
            CHECK(a.error == std::errc::connection_refused);
            CHECK(std::string(e.what()).find(a.address.to_string()) != std::string::npos);
        }
    }
    try {
        run(rt, eddy::net::TcpStream::connect("127.0.0.1:" + std::to_string(port)));
        FAIL("no exception");
    } catch (const eddy::net::ConnectError& e) {
        CHECK(e.attempts().size() == 1);
        CHECK(std::string(e.what()).find("127.0.0.1:" + std::to_string(port) + ": Connection refused") !=
              std::string::npos);
    }
}
