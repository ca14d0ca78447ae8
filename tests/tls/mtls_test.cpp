// tests/tls/mtls_test.cpp: production TLS beyond one verified server: mutual TLS (client
// certificates: a good one, none, an expired one, one from another CA), the peer's identity
// on the stream (PeerCertificate), session resumption (eddy with eddy, s_client -sess_in
// against eddy, eddy against s_server) and reloading a live server's certificate, also while
// handshakes run on the workers. The certificates are made once per process, with the
// helpers' throwaway CA.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <eddy/net/tcp_listener.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/tasks/task.hpp>
#include <eddy/tls/certificate.hpp>
#include <eddy/tls/context.hpp>
#include <eddy/tls/error.hpp>
#include <eddy/tls/stream.hpp>

#include "tls/tls_helpers.hpp"

using namespace eddy::test::tls;  // the helpers of this folder
namespace tls = eddy::tls;

namespace {

// A connect whose own outcome does not matter (with TLS 1.3 the client finishes its
// handshake before the server has judged its certificate): the server's side is the test.
Task<void> connect_and_read(SocketAddr addr, tls::Context ctx) {
    try {
        TlsStream s = co_await connect_tls(addr, std::move(ctx));
        (void)co_await read_text(s);
    } catch (const tls::Error&) {
    }
}

// The server's accept() failure with a client context `client`.
Task<TlsFailure> refused(tls::Context client) {
    auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    auto [f, ignored] = co_await when_all(tls_error_of(accept_tls(listener, MoreCerts::server())),
                                          connect_and_read(listener.local_address(), std::move(client)));
    co_return f;
}

}  // namespace

TEST_CASE("mutual TLS, eddy with eddy: the client's identity on the server, the server's on the client") {
    more_certs();
    Runtime rt(RuntimeConfig{.workers = 2});
    run(rt, []() -> Task<void> {
        TlsPair p = co_await greeted_pair(MoreCerts::client("alice"), MoreCerts::server());
        const std::optional<tls::PeerCertificate> alice = p.server.peer_certificate();
        REQUIRE(alice.has_value());
        CHECK(alice->common_name == "alice");
        CHECK(alice->subject == "O=eddy tests,CN=alice");
        CHECK(alice->issuer == "CN=eddy test CA");
        CHECK(alice->dns_names == std::vector<std::string>{"alice.example"});
        CHECK(alice->ip_addresses == std::vector<std::string>{"10.0.0.1"});
        CHECK(alice->emails == std::vector<std::string>{"alice@example.org"});
        CHECK(alice->uris == std::vector<std::string>{"spiffe://example.org/alice"});
        const auto now = std::chrono::system_clock::now();
        CHECK(alice->not_before <= now + std::chrono::hours(1));
        CHECK(alice->not_after > now + std::chrono::hours(24));
        CHECK(!alice->serial.empty());
        CHECK(alice->sha256_fingerprint.size() == 32 * 3 - 1);
        const std::optional<tls::PeerCertificate> server = p.client.peer_certificate();
        REQUIRE(server.has_value());
        CHECK(server->common_name == "localhost");
        CHECK(server->ip_addresses == std::vector<std::string>{"127.0.0.1"});
        CHECK(server->dns_names == std::vector<std::string>{"localhost"});
        CHECK(server->serial != alice->serial);
    }());
}

TEST_CASE("mutual TLS refusals, eddy with eddy: no certificate, expired, another CA") {
    more_certs();
    Runtime rt(RuntimeConfig{.workers = 2});
    std::string client;
    const char* reason = nullptr;
    SUBCASE("none") { reason = "eddy::tls::Stream::accept: peer did not return a certificate"; }
    SUBCASE("expired") {
        client = "old";
        reason = "certificate verify failed: certificate has expired";
    }
    SUBCASE("another CA") {
        client = "mallory";
        reason = "certificate verify failed: unable to get local issuer certificate";
    }
    const TlsFailure f = run(rt, refused(MoreCerts::client(client)));
    INFO(f.what);
    CHECK(f.code == tls::errc::certificate);
    CHECK(contains(f.what, reason));
}

TEST_CASE("request_client_certificate: a client without one is accepted, one with one is identified") {
    more_certs();
    Runtime rt(RuntimeConfig{.workers = 2});
    run(rt, []() -> Task<void> {
        TlsPair anonymous = co_await greeted_pair(MoreCerts::client(""), MoreCerts::server(false));
        CHECK(!anonymous.server.peer_certificate().has_value());
        TlsPair alice = co_await greeted_pair(MoreCerts::client("alice"), MoreCerts::server(false));
        REQUIRE(alice.server.peer_certificate().has_value());
        CHECK(alice.server.peer_certificate()->common_name == "alice");
    }());
    // Asked, a certificate that does not verify is still refused.
    auto client = MoreCerts::client("mallory");
    auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    const TlsFailure f = run(rt, [](TcpListener& l, tls::Context c) -> Task<TlsFailure> {
        auto [failure, ignored] = co_await when_all(tls_error_of(accept_tls(l, MoreCerts::server(false))),
                                                    connect_and_read(l.local_address(), std::move(c)));
        co_return failure;
    }(listener, client));
    CHECK(f.code == tls::errc::certificate);
}

TEST_CASE("mutual TLS setup errors are tls::Error (setup) naming the call and the reason") {
    more_certs();
    auto expect = [](auto call, const char* part) {
        try {
            call();
            FAIL("no exception");
        } catch (const tls::Error& e) {
            INFO(e.what());
            CHECK(e.code() == tls::errc::setup);
            CHECK(contains(e.what(), part));
        }
    };
    expect([] { certs().client().require_client_certificate(certs().ca()); },
           "require_client_certificate: a client context");
    expect([] { certs().server().request_client_certificate(certs().file("nothing.pem")); },
           "request_client_certificate: ");
    expect([] { certs().client().use_certificate(MoreCerts::cert("alice"), MoreCerts::key("old")); },
           "key values mismatch");
    expect([] { certs().client().use_certificate(certs().file("nothing.pem"), MoreCerts::key("alice")); },
           "No such file or directory");
    expect([] { certs().client().use_certificate(MoreCerts::key("alice"), MoreCerts::key("alice")); },
           "no PEM certificate");
}

TEST_CASE("eddy server requiring client certificates, s_client: with a good one, none, an expired one") {
    more_certs();
    auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    Runtime rt(RuntimeConfig{.workers = 2});
    std::vector<std::string> options = {"-CAfile", certs().ca(), "-verify_return_error", "-quiet"};
    SUBCASE("alice") {
        options.insert(options.end(), {"-cert", MoreCerts::cert("alice"), "-key", MoreCerts::key("alice")});
        SClient client(listener.local_address().port(), options, "ping\n");
        const std::string cn = run(rt, [](TcpListener& l) -> Task<std::string> {
            TlsStream s = co_await accept_tls(l, MoreCerts::server());
            CHECK(co_await read_line(s) == "ping\n");
            co_await s.write_all(std::string_view("pong\n"));
            co_await s.shutdown();
            co_return s.peer_certificate().value().common_name;
        }(listener));
        CHECK(cn == "alice");
        CHECK(client.process.read_through_line("pong"));
        const std::optional<eddy::test::child::Exit> e = client.process.wait_exit();
        REQUIRE(e.has_value());
        CHECK(e->status == 0);
    }
    SUBCASE("none") {
        SClient client(listener.local_address().port(), options, "");
        const TlsFailure f = run(rt, tls_error_of(accept_tls(listener, MoreCerts::server())));
        CHECK(f.code == tls::errc::certificate);
        CHECK(contains(f.what, "peer did not return a certificate"));
        CHECK(client.process.wait_stderr("alert certificate required"));
        client.process.stop();
    }
    SUBCASE("expired") {
        options.insert(options.end(), {"-cert", MoreCerts::cert("old"), "-key", MoreCerts::key("old")});
        SClient client(listener.local_address().port(), options, "");
        const TlsFailure f = run(rt, tls_error_of(accept_tls(listener, MoreCerts::server())));
        CHECK(f.code == tls::errc::certificate);
        CHECK(contains(f.what, "certificate has expired"));
        CHECK(client.process.wait_stderr("alert certificate expired"));
        client.process.stop();
    }
}

TEST_CASE("eddy client with a certificate, s_server -Verify 1: accepted; without one, the server's alert") {
    more_certs();
    SServer server({"-rev", "-Verify", "1", "-CAfile", certs().ca(), "-verify_return_error"});
    Runtime rt(RuntimeConfig{.workers = 2});
    run(rt, [](SocketAddr addr) -> Task<void> {
        TlsStream s = co_await connect_tls(addr, MoreCerts::client("alice"));
        co_await s.write_all(std::string_view("abc\n"));
        CHECK(co_await read_line(s) == "cba\n");
        CHECK(s.peer_certificate().value().common_name == "localhost");
    }(server.addr()));
    CHECK(server.process.wait_stderr("CN = alice"));
    // Without: TLS 1.3 finishes the client's handshake first; the refusal is the next read.
    const TlsFailure f = run(rt, [](SocketAddr addr) -> Task<TlsFailure> {
        TlsStream s = co_await connect_tls(addr, MoreCerts::client(""));
        co_return co_await tls_error_of(read_text(s));
    }(server.addr()));
    INFO(f.what);
    CHECK(f.code == tls::errc::protocol);
    CHECK(contains(f.what, "certificate required"));
    server.process.stop();
}
