// tests/tls/stream_test.cpp: tls::Stream<TcpStream> talking to itself in one runtime, and
// tls::Context's setup errors. A round trip with ALPN and a clean close (read() == 0), a
// megabyte each way with a reader and a writer running at once on each end, every way a
// certificate is refused (untrusted CA, self-signed, wrong host name, wrong IP address), a
// failure that leaves no error queued for the next OpenSSL user of the thread, a
// peer that closes the TCP connection without close_notify (mid-stream and mid-handshake),
// a cancelled read that leaves the stream usable, a cancelled write whose accepted records
// go out with the next write, a second read at once refused, and each documented misuse error.
#include <doctest/doctest.h>

#include <openssl/err.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include <eddy/time/with_timeout.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/net/tcp_stream.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>
#include <eddy/tls/context.hpp>
#include <eddy/tls/error.hpp>
#include <eddy/tls/stream.hpp>

#include "support/net_helpers.hpp"
#include "support/sync_helpers.hpp"
#include "tls/tls_helpers.hpp"

using namespace eddy::test::tls;  // the helpers of this folder
using eddy::test::bytes;
using eddy::test::pattern;
namespace tls = eddy::tls;

static_assert(eddy::io::AsyncStream<TlsStream>);

namespace {

// A client (its own Context) that connects to a server (certs().server() or `server_ctx`)
// and the failures both ends report.
struct Refusal {
    TlsFailure client;
    TlsFailure server;
};
Task<Refusal> refused(tls::Context client_ctx, tls::Context server_ctx, std::string name) {
    auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    auto [c, s] = co_await eddy::when_all(
        tls_error_of(connect_tls(listener.local_address(), std::move(client_ctx), std::move(name))),
        tls_error_of(accept_tls(listener, std::move(server_ctx))));
    co_return Refusal{c, s};
}

}  // namespace

TEST_CASE("a round trip with ALPN, then close_notify both ways: read() gives 0") {
    Runtime rt(RuntimeConfig{.workers = 2});
    run(rt, []() -> Task<void> {
        auto client_ctx = certs().client();
        client_ctx.set_alpn({"eddy/2", "eddy/1"});
        auto server_ctx = certs().server();
        server_ctx.set_alpn({"eddy/1"});
        TlsPair p = co_await tls_pair(client_ctx, server_ctx);
        CHECK(p.client.alpn_protocol() == "eddy/1");
        CHECK(p.server.alpn_protocol() == "eddy/1");

        CHECK(co_await p.client.write_all(std::string_view("ping")) == 4);
        CHECK(co_await read_text_exact(p.server, 4) == "ping");
        CHECK(co_await p.server.write(bytes("pong")) == 4);
        CHECK(co_await read_text_exact(p.client, 4) == "pong");

        co_await p.client.shutdown();
        CHECK(co_await read_text(p.server) == "");  // close_notify: end of stream, no error
        co_await p.server.shutdown();
        CHECK(co_await read_text(p.client) == "");
        CHECK(co_await read_text(p.client) == "");  // and it stays there
    }());
}

TEST_CASE("a megabyte each way, a reader and a writer running at once on both ends") {
    Runtime rt(RuntimeConfig{.workers = 2});
    run(rt, []() -> Task<void> {
        TlsPair p = co_await tls_pair(certs().client(), certs().server());
        const auto up = pattern(1 << 20, 7);
        const auto down = pattern(1 << 20, 8);
        auto send = [](TlsStream& s, std::span<const std::byte> data) -> Task<std::size_t> {
            co_return co_await s.write_all(data);
        };
        auto receive = [](TlsStream& s, std::size_t n) -> Task<std::string> {
            co_return co_await read_text_exact(s, n);
        };
        auto [sent_up, sent_down, got_up, got_down] = co_await eddy::when_all(
            send(p.client, up), send(p.server, down), receive(p.server, up.size()), receive(p.client, down.size()));
        CHECK(sent_up == up.size());
        CHECK(sent_down == down.size());
        CHECK(got_up == eddy::test::text(up));
        CHECK(got_down == eddy::test::text(down));
    }());
}

TEST_CASE("a certificate from an untrusted CA is refused; the server sees the client's alert") {
    Runtime rt(RuntimeConfig{.workers = 2});
    // Context::client() trusts the system's CAs only, not the throwaway one.
    const Refusal r = run(rt, refused(tls::Context::client(), certs().server(), "localhost"));
    CHECK(r.client.code == tls::errc::certificate);
    CHECK(contains(r.client.what,
                   "eddy::tls::Stream::connect: certificate verify failed: unable to get local issuer certificate"));
    CHECK(r.server.code == tls::errc::protocol);
    CHECK(contains(r.server.what, "eddy::tls::Stream::accept: tlsv1 alert unknown ca"));
}

TEST_CASE("a self-signed certificate is refused") {
    Runtime rt(RuntimeConfig{.workers = 2});
    const Refusal r =
        run(rt, refused(tls::Context::client(), tls::Context::server(certs().ca(), certs().ca_key()), "localhost"));
    CHECK(r.client.code == tls::errc::certificate);
    CHECK(contains(r.client.what, "certificate verify failed: self-signed certificate"));
    CHECK(r.server.code == tls::errc::protocol);
}

TEST_CASE("a failure leaves the worker's OpenSSL error queue empty") {
    // One worker: every OpenSSL call of both ends ran on the thread that checks the queue.
    Runtime rt(RuntimeConfig{.workers = 1});
    run(rt, []() -> Task<void> {
        const Refusal r = co_await refused(tls::Context::client(), certs().server(), "localhost");
        CHECK(r.client.code == tls::errc::certificate);
        CHECK(r.server.code == tls::errc::protocol);
        CHECK(ERR_peek_error() == 0);
    }());
}

TEST_CASE("a certificate for another name or address is refused") {
    Runtime rt(RuntimeConfig{.workers = 2});
    SUBCASE("a host name") {
        const Refusal r = run(rt, refused(certs().client(), certs().server(), "example.com"));
        CHECK(r.client.code == tls::errc::certificate);
        CHECK(contains(r.client.what, "certificate verify failed: hostname mismatch"));
    }
    SUBCASE("an IP address") {
        const Refusal r = run(rt, refused(certs().client(), certs().server(), "127.0.0.2"));
        CHECK(r.client.code == tls::errc::certificate);
        CHECK(contains(r.client.what, "certificate verify failed: IP address mismatch"));
    }
    SUBCASE("the right address and name pass") {
        const Refusal by_ip = run(rt, refused(certs().client(), certs().server(), "127.0.0.1"));
        CHECK(!by_ip.client.code);
        CHECK(!by_ip.server.code);
    }
}

TEST_CASE("a peer that closes without close_notify: the data first, then errc::truncated, never a silent 0") {
    Runtime rt(RuntimeConfig{.workers = 2});
    run(rt, []() -> Task<void> {
        TlsPair p = co_await tls_pair(certs().client(), certs().server());
        co_await p.server.write_all(std::string_view("last words"));
        p.server.close();  // TCP FIN, no close_notify
        CHECK(co_await read_text_exact(p.client, 10) == "last words");
        const TlsFailure f = co_await tls_error_of(read_text(p.client));
        CHECK(f.code == tls::errc::truncated);
        CHECK(contains(f.what, "eddy::tls::Stream::read: the peer closed the connection without close_notify"));
        // The session is dead: the next read says so again.
        CHECK((co_await tls_error_of(read_text(p.client))).code == tls::errc::truncated);
    }());
}

TEST_CASE("a peer that closes during the handshake: errc::truncated") {
    Runtime rt(RuntimeConfig{.workers = 2});
    run(rt, []() -> Task<void> {
        auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
        // FIN at once, and no close(): closing with the ClientHello unread would send a RST
        // (ECONNRESET, a socket error, not this test's case). The client drops its socket
        // after the failure, which ends the read.
        auto hang_up = [](TcpListener& l) -> Task<std::string> {
            eddy::net::TcpStream s = co_await l.accept();
            s.shutdown();
            co_return co_await eddy::test::read_to_end(s);
        };
        auto [f, hello] = co_await eddy::when_all(tls_error_of(connect_tls(listener.local_address(), certs().client())),
                                                  hang_up(listener));
        CHECK(f.code == tls::errc::truncated);
        REQUIRE(!hello.empty());
        CHECK(hello[0] == '\x16');  // a TLS handshake record: the ClientHello
    }());
}

TEST_CASE("a cancelled read throws OperationCancelled and the stream reads on") {
    Runtime rt(RuntimeConfig{.workers = 2});
    run(rt, []() -> Task<void> {
        TlsPair p = co_await tls_pair(certs().client(), certs().server());
        bool timed_out = false;
        try {
            (void)co_await eddy::with_timeout(read_text(p.client), std::chrono::milliseconds(50));
        } catch (const eddy::TimedOut&) {
            timed_out = true;
        }
        CHECK(timed_out);
        co_await p.server.write_all(std::string_view("after the cancel"));
        CHECK(co_await read_text_exact(p.client, 16) == "after the cancel");
        co_await p.client.write_all(std::string_view("both ways"));
        CHECK(co_await read_text_exact(p.server, 9) == "both ways");
    }());
}

TEST_CASE("a cancelled write: what TLS took goes out first with the next write, whole records, in order") {
    Runtime rt(RuntimeConfig{.workers = 2});
    run(rt, []() -> Task<void> {
        TlsPair p = co_await tls_pair(certs().client(), certs().server());
        // Far more than the socket buffers hold while the server does not read.
        const auto big = pattern(16 << 20, 9);
        bool timed_out = false;
        try {
            (void)co_await eddy::with_timeout(p.client.write_all(big), std::chrono::milliseconds(100));
        } catch (const eddy::TimedOut&) {
            timed_out = true;
        }
        REQUIRE(timed_out);
        auto tail = [](TlsStream& s) -> Task<void> {
            co_await s.write_all(std::string_view("tail"));
            co_await s.shutdown();
        };
        auto [done, got] = co_await eddy::when_all(tail(p.client), read_text_exact(p.server, big.size() + 4));
        (void)done;
        // A prefix of `big` made of whole 16 KiB records (the one being sent when the cancel
        // came included), then "tail": nothing lost in the middle, nothing twice.
        REQUIRE(got.size() >= 4);
        const std::size_t prefix = got.size() - 4;
        CHECK(got.substr(prefix) == "tail");
        CHECK(prefix < big.size());
        CHECK(prefix % (16 * 1024) == 0);
        CHECK(got.substr(0, prefix) == eddy::test::text(std::span(big).first(prefix)));
    }());
}

TEST_CASE("a second read while one is pending throws std::logic_error; the pending read goes on") {
    Runtime rt(RuntimeConfig{.workers = 1});  // one worker: settle() lets the first read reach its wait
    run(rt, []() -> Task<void> {
        TlsPair p = co_await tls_pair(certs().client(), certs().server());
        eddy::JoinHandle<std::string> first = eddy::spawn(read_text(p.client));  // nothing sent yet: it waits
        co_await eddy::test::settle();
        std::string second = "it read";
        try {
            std::array<std::byte, 16> buf;
            (void)co_await p.client.read(buf);
        } catch (const std::logic_error& e) {
            second = e.what();
        }
        CHECK(contains(second, "another read of this stream is pending"));
        co_await p.server.write_all(std::string_view("late"));
        CHECK(co_await std::move(first) == "late");
        // The turn was given back: reading goes on.
        co_await p.server.write_all(std::string_view("more"));
        CHECK(co_await read_text_exact(p.client, 4) == "more");
    }());
}

TEST_CASE("misuse: writing after shutdown(), an empty server name, a Context of the wrong role") {
    Runtime rt(RuntimeConfig{.workers = 2});
    run(rt, []() -> Task<void> {
        TlsPair p = co_await tls_pair(certs().client(), certs().server());
        co_await p.client.shutdown();
        const TlsFailure f = co_await tls_error_of(p.client.write_all(std::string_view("late")));
        CHECK(f.code == tls::errc::protocol);
        CHECK(contains(f.what, "written after shutdown()"));
        // Reading goes on: the server's data, then its close_notify.
        co_await p.server.write_all(std::string_view("bye"));
        co_await p.server.shutdown();
        CHECK(co_await read_text_exact(p.client, 3) == "bye");
        CHECK(co_await read_text(p.client) == "");
    }());
    auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    const SocketAddr addr = listener.local_address();
    CHECK_THROWS_AS(run(rt, connect_tls(addr, certs().client(), "")), std::invalid_argument);
    const TlsFailure wrong_role = run(rt, tls_error_of(connect_tls(addr, certs().server())));
    CHECK(wrong_role.code == tls::errc::setup);
    CHECK(contains(wrong_role.what, "the Context is a server context"));
}

TEST_CASE("Context setup errors: tls::Error with errc::setup and OpenSSL's reason") {
    auto setup_error = [](auto make) -> std::string {
        try {
            make();
        } catch (const tls::Error& e) {
            CHECK(e.code() == tls::errc::setup);
            CHECK(e.code().category().name() == std::string("tls"));
            return e.what();
        }
        FAIL("no tls::Error");
        return {};
    };
    const std::string missing = certs().file("missing.pem");
    CHECK(contains(setup_error([&] { tls::Context::server(missing, certs().server_key()); }),
                   "eddy::tls::Context::server: certificate "));
    CHECK(contains(setup_error([&] { tls::Context::server(certs().server_cert(), missing); }), "key "));
    // The CA's key does not belong to the server's certificate.
    CHECK(contains(setup_error([&] { tls::Context::server(certs().server_cert(), certs().ca_key()); }),
                   "key values mismatch"));
    CHECK(contains(setup_error([&] { tls::Context::client().load_verify_file(missing); }),
                   "eddy::tls::Context::load_verify_file: "));
    auto ctx = tls::Context::client();
    CHECK_THROWS_AS(ctx.set_alpn({""}), std::invalid_argument);
    CHECK_THROWS_AS(ctx.set_alpn({std::string(256, 'x')}), std::invalid_argument);
    CHECK(tls::make_error_code(tls::errc::truncated).message() ==
          "TLS stream truncated: the peer closed without close_notify");
}
