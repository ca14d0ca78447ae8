// tests/tls/session_test.cpp: what a TLS service does across connections. Session
// resumption: eddy with eddy (both sides say resumed, the client's certificate survives it),
// `openssl s_client -sess_out/-sess_in` against an eddy server ("Reused"), an eddy client
// against `openssl s_server` on TLS 1.3 and 1.2. Reloading a live server's certificate: new
// handshakes see the new one, an open stream goes on, a bad pair changes nothing, and reloads
// from another thread while handshakes run on the workers (for TSan).
#include <doctest/doctest.h>

#include <atomic>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
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

// The subject of the certificate the server at `addr` presents to a fresh client.
Task<std::string> presented_subject(TcpListener& l, tls::Context server) {
    auto [c, s] = co_await when_all(connect_tls(l.local_address(), certs().client()), accept_tls(l, server));
    co_return c.peer_certificate().value().subject;
}

}  // namespace

TEST_CASE("resumption, eddy with eddy: the second connection of one client Context resumes on both sides") {
    more_certs();
    Runtime rt(RuntimeConfig{.workers = 2});
    run(rt, []() -> Task<void> {
        tls::Context client = certs().client();
        client.use_certificate(MoreCerts::cert("alice"), MoreCerts::key("alice"));
        tls::Context server = certs().server();
        server.require_client_certificate(certs().ca());
        TlsPair first = co_await greeted_pair(client, server);
        CHECK(!first.client.session_resumed());
        CHECK(!first.server.session_resumed());
        TlsPair second = co_await greeted_pair(client, server);
        CHECK(second.client.session_resumed());
        CHECK(second.server.session_resumed());
        // The session remembers who the peers were.
        CHECK(second.server.peer_certificate().value().common_name == "alice");
        CHECK(second.client.peer_certificate().value().common_name == "localhost");
        // Another client Context has no session to offer; another server Context (other
        // ticket keys) cannot open this client's.
        tls::Context fresh_client = certs().client();
        fresh_client.use_certificate(MoreCerts::cert("alice"), MoreCerts::key("alice"));
        TlsPair fresh = co_await greeted_pair(fresh_client, server);
        CHECK(!fresh.server.session_resumed());
        tls::Context other_server = certs().server();
        other_server.require_client_certificate(certs().ca());
        TlsPair other = co_await greeted_pair(client, other_server);
        CHECK(!other.client.session_resumed());
    }());
}

TEST_CASE("resumption, s_client -sess_out then -sess_in against an eddy server: \"Reused\"") {
    more_certs();
    auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    Runtime rt(RuntimeConfig{.workers = 2});
    tls::Context server = certs().server();
    server.require_client_certificate(certs().ca());
    const std::string session = certs().file("s_client.session");
    std::vector<std::string> options = {
        "-ign_eof", "-CAfile", certs().ca(), "-cert", MoreCerts::cert("alice"), "-key", MoreCerts::key("alice")};
    auto serve = [](TcpListener& l, tls::Context ctx) -> Task<bool> {
        TlsStream s = co_await accept_tls(l, std::move(ctx));
        CHECK(co_await read_line(s) == "ping\n");
        co_await s.write_all(std::string_view("pong\n"));
        co_await s.shutdown();
        co_return s.session_resumed();
    };
    for (const char* step : {"-sess_out", "-sess_in"}) {
        std::vector<std::string> o = options;
        o.insert(o.end(), {step, session});
        SClient client(listener.local_address().port(), o, "ping\n");
        const bool resumed = run(rt, serve(listener, server));
        CHECK(resumed == (std::string(step) == "-sess_in"));
        // s_client ends at our close_notify; its session printouts and the data interleave.
        const std::string out = client.process.rest_of_output();
        REQUIRE(client.process.wait_exit().has_value());
        INFO(out);
        CHECK(contains(out, "pong"));
        CHECK(contains(out, std::string(step) == "-sess_in" ? "\nReused, TLSv1.3" : "\nNew, TLSv1.3"));
    }
}

TEST_CASE("resumption, eddy client against s_server: the second connection resumes") {
    more_certs();
    const char* version = nullptr;
    SUBCASE("TLS 1.3") { version = "-tls1_3"; }
    SUBCASE("TLS 1.2") { version = "-tls1_2"; }
    SServer server({"-www", version});
    Runtime rt(RuntimeConfig{.workers = 2});
    run(rt, [](SocketAddr addr) -> Task<void> {
        tls::Context client = certs().client();
        std::vector<bool> resumed;
        for (int i = 0; i < 2; ++i) {
            TlsStream s = co_await connect_tls(addr, client);
            co_await s.write_all(std::string_view("GET / HTTP/1.0\r\n\r\n"));
            std::string page;
            for (std::string part; !(part = co_await read_text(s)).empty();) page += part;
            CHECK(page.rfind("HTTP/1.0 200 ok", 0) == 0);
            resumed.push_back(s.session_resumed());
        }
        CHECK(resumed == std::vector<bool>{false, true});
    }(server.addr()));
    server.process.stop();
}

TEST_CASE("reload: new handshakes present the new certificate, an open stream goes on, bad pairs change nothing") {
    more_certs();
    auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    Runtime rt(RuntimeConfig{.workers = 2});
    run(rt, [](TcpListener& l) -> Task<void> {
        tls::Context server = certs().server();
        TlsPair first = co_await greeted_pair(certs().client(), server);
        const tls::PeerCertificate old = first.client.peer_certificate().value();
        CHECK(old.subject == "CN=localhost");
        server.use_certificate(MoreCerts::cert("server2"), MoreCerts::key("server2"));
        const std::string now = co_await presented_subject(l, server);
        CHECK(now == "O=reloaded,CN=localhost");
        // The first stream still works, and still names its own certificate.
        co_await first.client.write_all(std::string_view("still here\n"));
        CHECK(co_await read_line(first.server) == "still here\n");
        CHECK(first.client.peer_certificate().value().serial == old.serial);
        // A key of another certificate, a missing file: refused, the reloaded pair stays.
        for (auto [cert, key, reason] :
             {std::tuple{MoreCerts::cert("server2"), certs().server_key(), "key values mismatch"},
              std::tuple{certs().file("gone.pem"), MoreCerts::key("server2"), "gone.pem"}}) {
            try {
                server.use_certificate(cert, key);
                FAIL("no exception");
            } catch (const tls::Error& e) {
                CHECK(e.code() == tls::errc::setup);
                CHECK(contains(e.what(), "eddy::tls::Context::use_certificate"));
                CHECK(contains(e.what(), reason));
            }
        }
        CHECK(co_await presented_subject(l, server) == "O=reloaded,CN=localhost");
    }(listener));
}

TEST_CASE("reload from another thread while handshakes run on the workers: each sees one whole pair") {
    more_certs();
    auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    Runtime rt(RuntimeConfig{.workers = 2});
    tls::Context server = certs().server();
    std::atomic<bool> done{false};
    std::thread reloader([&] {
        for (int i = 0; i < 40 && !done.load(std::memory_order_relaxed); ++i) {  // bounded: it takes a core
            if (i % 2 == 0) server.use_certificate(MoreCerts::cert("server2"), MoreCerts::key("server2"));
            else server.use_certificate(certs().server_cert(), certs().server_key());
        }
    });
    const std::set<std::string> seen = run(rt, [](TcpListener& l, tls::Context ctx) -> Task<std::set<std::string>> {
        std::set<std::string> subjects;
        for (int i = 0; i < 8; ++i) subjects.insert(co_await presented_subject(l, ctx));
        co_return subjects;
    }(listener, server));
    done.store(true, std::memory_order_relaxed);
    reloader.join();
    for (const std::string& s : seen) CHECK((s == "CN=localhost" || s == "O=reloaded,CN=localhost"));
}
