// tests/tls/openssl_peer_test.cpp: tls::Stream against real peers, OpenSSL's own `openssl
// s_server` and `openssl s_client`, started here on 127.0.0.1 with the throwaway certificate.
// eddy as client: an echo (-rev) round trip, a web page (-www) read to its close_notify with
// TLS 1.3 and 1.2, the server's certificate refused without the CA, and s_server killed
// mid-session (a close without close_notify: errc::truncated). eddy as server: s_client
// verifies us and exchanges a line, and an s_client that does not trust us aborts the
// handshake with an alert that accept() reports. And a client that asks for TLS 1.3 at
// least refuses a server that offers 1.2 only.
#include <doctest/doctest.h>

#include <signal.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <eddy/net/socket_addr.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/tasks/task.hpp>
#include <eddy/tls/context.hpp>
#include <eddy/tls/error.hpp>
#include <eddy/tls/stream.hpp>

#include "support/child_process.hpp"
#include "support/net_helpers.hpp"
#include "tls/tls_helpers.hpp"

using namespace eddy::test::tls;  // the helpers of this folder
namespace tls = eddy::tls;

namespace {

Task<std::string> read_to_end(TlsStream& s) {
    std::string all;
    for (std::string part; !(part = co_await read_text(s)).empty();) all += part;
    co_return all;
}

}  // namespace

TEST_CASE("eddy client, s_server -rev: lines go out and come back reversed; killing the server is a truncation") {
    openssl_program();
    SServer server({"-rev"});
    Runtime rt(RuntimeConfig{.workers = 2});
    run(rt, [](SServer& srv) -> Task<void> {
        TlsStream s = co_await connect_tls(srv.addr(), certs().client(), "localhost");
        co_await s.write_all(std::string_view("hello eddy\n"));
        CHECK(co_await read_line(s) == "ydde olleh\n");
        co_await s.write_all(std::string_view("second\n"));
        CHECK(co_await read_line(s) == "dnoces\n");
        srv.process.signal(SIGKILL);  // the kernel closes its socket: no close_notify
        const TlsFailure f = co_await tls_error_of(read_text(s));
        CHECK(f.code == tls::errc::truncated);
    }(server));
    CHECK(server.process.stop().status == 128 + SIGKILL);
}

TEST_CASE("eddy client, s_server -www: the page, then close_notify (read() == 0), on TLS 1.3 and 1.2") {
    openssl_program();
    const char* version = nullptr;
    SUBCASE("TLS 1.3") { version = "-tls1_3"; }
    SUBCASE("TLS 1.2") { version = "-tls1_2"; }
    SServer server({"-www", version});
    Runtime rt(RuntimeConfig{.workers = 2});
    const std::string page = run(rt, [](SocketAddr addr) -> Task<std::string> {
        TlsStream s = co_await connect_tls(addr, certs().client(), "127.0.0.1");
        co_await s.write_all(std::string_view("GET / HTTP/1.0\r\n\r\n"));
        co_return co_await read_to_end(s);  // would throw tls::Error if it ended without close_notify
    }(server.addr()));
    INFO(page);
    CHECK(page.rfind("HTTP/1.0 200 ok", 0) == 0);
    CHECK(contains(page, std::string(version) == "-tls1_3" ? "TLSv1.3" : "TLSv1.2"));
    server.process.stop();  // still serving: SIGTERM
}

TEST_CASE("eddy client refuses s_server's certificate without the CA") {
    openssl_program();
    SServer server({"-rev"});
    Runtime rt(RuntimeConfig{.workers = 2});
    const TlsFailure f = run(rt, tls_error_of(connect_tls(server.addr(), tls::Context::client(), "localhost")));
    CHECK(f.code == tls::errc::certificate);
    CHECK(contains(f.what, "certificate verify failed: unable to get local issuer certificate"));
    // Our refusal reached s_server as an alert.
    CHECK(server.process.wait_stderr("tlsv1 alert unknown ca"));
    server.process.stop();
}

TEST_CASE("eddy server, s_client verifying it: a line each way, then close_notify ends s_client cleanly") {
    openssl_program();
    auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    SClient client(listener.local_address().port(),
                   {"-CAfile", certs().ca(), "-verify_return_error", "-verify_hostname", "localhost", "-quiet"},
                   "ping from s_client\n");
    Runtime rt(RuntimeConfig{.workers = 2});
    const std::string got = run(rt, [](TcpListener& l) -> Task<std::string> {
        TlsStream s = co_await accept_tls(l, certs().server());
        std::string line = co_await read_line(s);
        co_await s.write_all(std::string_view("pong from eddy\n"));
        co_await s.shutdown();
        co_return line;
    }(listener));
    CHECK(got == "ping from s_client\n");
    CHECK(client.process.read_through_line("pong from eddy"));
    const std::optional<eddy::test::child::Exit> e = client.process.wait_exit();
    REQUIRE(e.has_value());
    INFO("s_client's stderr: " << e->err);
    CHECK(e->status == 0);
}

TEST_CASE("eddy server, s_client that does not trust it: accept() reports the client's alert") {
    openssl_program();
    auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    SClient client(listener.local_address().port(), {"-verify_return_error", "-quiet"}, "");
    Runtime rt(RuntimeConfig{.workers = 2});
    const TlsFailure f = run(rt, tls_error_of(accept_tls(listener, certs().server())));
    CHECK(f.code == tls::errc::protocol);
    CHECK(contains(f.what, "eddy::tls::Stream::accept: tlsv1 alert unknown ca"));
    const std::optional<eddy::test::child::Exit> e = client.process.wait_exit();
    REQUIRE(e.has_value());
    CHECK(e->status != 0);
    CHECK(contains(e->err, "verify error"));
}

TEST_CASE("set_min_version(kTls13): an eddy client refuses an s_server that speaks TLS 1.2 only") {
    openssl_program();
    SServer server({"-www", "-tls1_2"});
    auto ctx = certs().client();
    ctx.set_min_version(tls::Version::kTls13);
    Runtime rt(RuntimeConfig{.workers = 2});
    const TlsFailure f = run(rt, tls_error_of(connect_tls(server.addr(), ctx, "localhost")));
    CHECK(f.code == tls::errc::protocol);
    CHECK(contains(f.what, "eddy::tls::Stream::connect: tlsv1 alert protocol version"));
    server.process.stop();
}
