// tests/compose/tls_test.cpp: tls::Stream::read, write and write_all under every combinator
// (tests/compose/compose.hpp), over a loopback pair with throwaway certificates
// (tests/tls/tls_helpers.hpp; skipped, exit 77, without the `openssl` command). Built only
// where the build has TLS. The read's recheck proves a cancelled read left the TLS session
// whole: the next record decrypts. The writes have no blocking form here: filling the path
// through TLS needs a timed-out write, which leaves part of a record sent.
#include <doctest/doctest.h>

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>

#include <eddy/eddy.hpp>

#include "compose/compose.hpp"
#include "tls/tls_helpers.hpp"

using eddy::Task;
using eddy::test::bytes;
using eddy::test::text;
using eddy::test::compose::check_all;
using eddy::test::tls::certs;
using eddy::test::tls::TlsPair;

namespace {

struct Session {
    // The certificates are made on the test thread (openssl runs as a child process).
    eddy::tls::Context client_ctx = certs().client();
    eddy::tls::Context server_ctx = certs().server();
    std::optional<TlsPair> ends;
    Task<void> setup() {
        ends.emplace(co_await eddy::test::tls::tls_pair(client_ctx, server_ctx));
        // Without it a record can wait up to 40 ms in the sender's kernel (Nagle's algorithm
        // holds a small segment until the previous one is acknowledged, and the server's
        // session tickets put the peer into delayed ACKs): the paused clock, which does not
        // wait for I/O, would then fire the completing read's timeout first.
        ends->client.next_layer().set_nodelay(true);
        ends->server.next_layer().set_nodelay(true);
    }
};

struct TlsRead : Session {
    std::array<std::byte, 64> buf{};
    Task<void> arm() { co_await ends->client.write_all("abc"); }
    auto completing() { return ends->server.read(buf); }
    void check(std::size_t n) { COMPOSE_CHECK(text(std::span(buf).first(n)) == "abc"); }
    auto blocking() { return ends->server.read(buf); }
    Task<void> recheck() {
        co_await ends->client.write_all("late");
        const std::size_t n = co_await ends->server.read(buf);
        COMPOSE_CHECK(text(std::span(buf).first(n)) == "late");
    }
};
TEST_CASE("tls: tls::Stream::read") { check_all<TlsRead>(); }

/// The writes' arm() reads back, at the client, what the completed ones wrote.
struct Written : Session {
    int written = 0;
    Task<void> arm() {
        for (; written > 0; --written) {
            const std::string got = co_await eddy::test::tls::read_text_exact(ends->client, 5);
            COMPOSE_CHECK(got == "hello");
        }
    }
    void check(std::size_t n) {
        COMPOSE_CHECK(n == 5);
        ++written;
    }
};

struct TlsWrite : Written {
    auto completing() { return ends->server.write(bytes("hello")); }
};
TEST_CASE("tls: tls::Stream::write") { check_all<TlsWrite>(); }

struct TlsWriteAll : Written {
    auto completing() { return ends->server.write_all("hello"); }
};
TEST_CASE("tls: tls::Stream::write_all") { check_all<TlsWriteAll>(); }

}  // namespace
