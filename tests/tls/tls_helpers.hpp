// tests/tls/tls_helpers.hpp: what the TLS tests share: the `openssl` command (the test is
// skipped, exit 77, where it is missing), a throwaway CA and a server certificate for
// 127.0.0.1 and localhost made with it in a TempDir, run as child processes with bounded
// waits (tests/support/child_process.hpp), `openssl s_server` and `s_client` as peers, and a
// TCP connection wrapped in TLS on both ends.
#pragma once

#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <eddy/net/tcp_listener.hpp>
#include <eddy/net/tcp_stream.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/tasks/task.hpp>
#include <eddy/tls/context.hpp>
#include <eddy/tls/error.hpp>
#include <eddy/tls/stream.hpp>

#include "support/child_process.hpp"
#include "support/net_helpers.hpp"

namespace eddy::test::tls {

// The names every TLS test uses: `using namespace eddy::test::tls;` brings them in too.
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::net::SocketAddr;
using eddy::net::TcpListener;
using eddy::test::run;

using TlsStream = eddy::tls::Stream<net::TcpStream>;

/// The environment variable ChildProcess reads the openssl binary's path from.
inline constexpr const char* kOpensslEnv = "EDDY_TEST_OPENSSL";

/// The `openssl` command, found on PATH once; skips the whole test (77) if there is none.
inline const child::Program& openssl_program() {
    static const child::Program program = [] {
        if (std::getenv(kOpensslEnv) == nullptr) {
            const char* path = std::getenv("PATH");
            std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
            std::optional<std::string> found;
            for (std::size_t at = 0; at <= dirs.size() && !found;) {
                std::size_t end = dirs.find(':', at);
                if (end == std::string::npos) end = dirs.size();
                const std::string candidate = dirs.substr(at, end - at) + "/openssl";
                if (end > at && ::access(candidate.c_str(), X_OK) == 0) found = candidate;
                at = end + 1;
            }
            if (!found) {
                std::printf("SKIP: no openssl command on PATH (apt-get install openssl)\n");
                std::fflush(stdout);
                std::_Exit(77);
            }
            ::setenv(kOpensslEnv, found->c_str(), 1);
        }
        return child::Program{"openssl", kOpensslEnv, {}};
    }();
    return program;
}

/// Runs `openssl args...` to its end (bounded by kDeadline) and requires success.
inline void openssl(std::vector<std::string> args) {
    child::ChildProcess p(openssl_program(), args, {});
    const std::optional<child::Exit> e = p.wait_exit();
    REQUIRE_MESSAGE(e.has_value(), "openssl " << args.at(0) << " did not finish");
    REQUIRE_MESSAGE(e->status == 0, "openssl " << args.at(0) << " failed: " << e->err);
}

/// A throwaway CA (ca.pem, ca.key: self-signed, so also a certificate nobody trusts) and a
/// server certificate it signed (server.pem, server.key) for IP 127.0.0.1 and DNS localhost.
class Certs {
public:
    Certs() {
        std::ofstream(dir_.file("openssl.cnf")) << "[req]\ndistinguished_name = dn\nprompt = no\n"
                                                   "[dn]\nCN = eddy test\n"
                                                   "[ca_ext]\nbasicConstraints = critical,CA:TRUE\n"
                                                   "keyUsage = critical,keyCertSign,cRLSign\n"
                                                   "subjectKeyIdentifier = hash\n"
                                                   "[server_ext]\nbasicConstraints = CA:FALSE\n"
                                                   "subjectAltName = IP:127.0.0.1,DNS:localhost\n"
                                                   "extendedKeyUsage = serverAuth\n";
        const std::vector<std::string> key = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"};
        auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
            a.insert(a.end(), b.begin(), b.end());
            return a;
        };
        openssl(with({"req", "-x509", "-config", cnf(), "-extensions", "ca_ext", "-days", "2", "-subj",
                      "/CN=eddy test CA", "-keyout", ca_key(), "-out", ca()},
                     key));
        openssl(with({"req", "-new", "-config", cnf(), "-subj", "/CN=localhost", "-keyout", server_key(), "-out",
                      dir_.file("server.csr")},
                     key));
        openssl({"x509", "-req", "-in", dir_.file("server.csr"), "-CA", ca(), "-CAkey", ca_key(), "-CAcreateserial",
                 "-days", "2", "-extfile", cnf(), "-extensions", "server_ext", "-out", server_cert()});
    }

    std::string ca() const { return dir_.file("ca.pem"); }
    std::string ca_key() const { return dir_.file("ca.key"); }
    std::string server_cert() const { return dir_.file("server.pem"); }
    std::string server_key() const { return dir_.file("server.key"); }
    std::string file(const char* name) const { return dir_.file(name); }

    /// A client context trusting this CA only; a server context with the server certificate.
    eddy::tls::Context client() const { return eddy::tls::Context::client_trusting(ca()); }
    eddy::tls::Context server() const { return eddy::tls::Context::server(server_cert(), server_key()); }

private:
    std::string cnf() const { return dir_.file("openssl.cnf"); }
    TempDir dir_;
};

/// The certificates, made once per test program (each openssl run is a process).
inline const Certs& certs() {
    static const Certs c;
    return c;
}

/// Both ends of one TLS connection over loopback.
struct TlsPair {
    TlsStream client;
    TlsStream server;
};

/// The server's and the client's half of a connection over 127.0.0.1 (`name`: what the
/// client verifies).
inline Task<TlsStream> accept_tls(net::TcpListener& listener, eddy::tls::Context ctx) {
    co_return co_await TlsStream::accept(std::move(ctx), co_await listener.accept());
}
inline Task<TlsStream> connect_tls(net::SocketAddr addr, eddy::tls::Context ctx, std::string name = "localhost") {
    co_return co_await TlsStream::connect(std::move(ctx), co_await net::TcpStream::connect(addr), std::move(name));
}

/// Connects over 127.0.0.1 and runs both handshakes at once.
inline Task<TlsPair> tls_pair(eddy::tls::Context client_ctx, eddy::tls::Context server_ctx) {
    auto listener = net::TcpListener::bind(net::SocketAddr::loopback_v4(0));
    auto [c, s] = co_await when_all(connect_tls(listener.local_address(), std::move(client_ctx)),
                                    accept_tls(listener, std::move(server_ctx)));
    co_return TlsPair{std::move(c), std::move(s)};
}

/// One read (as a task of its own, for error_of and with_timeout); the bytes as text.
inline Task<std::string> read_text(TlsStream& s, std::size_t max = 4096) {
    std::string buf(max, '\0');
    const std::size_t n = co_await s.read(std::as_writable_bytes(std::span(buf)));
    buf.resize(n);
    co_return buf;
}

/// Reads until `want` bytes have arrived (or end of stream). At most 64 KiB per read: a
/// read gives one TLS record (16 KiB) at a time, and a buffer of the whole remainder, zeroed
/// for each read, made a 16 MiB transfer cost gigabytes of memset (20 s under TSan).
inline Task<std::string> read_text_exact(TlsStream& s, std::size_t want) {
    std::string all;
    while (all.size() < want) {
        std::string part = co_await read_text(s, std::min<std::size_t>(want - all.size(), 64 * 1024));
        if (part.empty()) break;
        all += part;
    }
    co_return all;
}

// A port nobody listens on right now (bound, then released for the child to take).
inline std::uint16_t free_port() { return TcpListener::bind(SocketAddr::loopback_v4(0)).local_address().port(); }

// `openssl s_server` on 127.0.0.1 with the server certificate and `mode` ("-rev", "-www",
// ...), once it says it accepts.
struct SServer {
    using ChildProcess = child::ChildProcess;
    explicit SServer(std::vector<std::string> mode)
        : port(free_port()), process(openssl_program(), args(port, std::move(mode)), {}) {
        REQUIRE_MESSAGE(process.read_through_line("ACCEPT"), "s_server did not start: " << process.stop().err);
    }
    static std::vector<std::string> args(std::uint16_t port, std::vector<std::string> mode) {
        std::vector<std::string> a = {
            "s_server", "-accept",           "127.0.0.1:" + std::to_string(port), "-cert", certs().server_cert(),
            "-key",     certs().server_key()};
        a.insert(a.end(), mode.begin(), mode.end());
        return a;
    }
    SocketAddr addr() const { return SocketAddr::loopback_v4(port); }
    std::uint16_t port;
    ChildProcess process;
};

// `openssl s_client` to 127.0.0.1:port with `options`, reading its input from a file holding
// `input` (through sh, as ChildProcess gives the child our own standard input).
struct SClient {
    using ChildProcess = child::ChildProcess;
    using Program = child::Program;
    SClient(std::uint16_t port, const std::vector<std::string>& options, const std::string& input)
        : process(shell(), command(port, options, input), {}) {}
    static const Program& shell() {
        ::setenv("EDDY_TEST_SH", "/bin/sh", 1);
        static const Program sh{"s_client", "EDDY_TEST_SH", {}};
        return sh;
    }
    static std::vector<std::string> command(std::uint16_t port, const std::vector<std::string>& options,
                                            const std::string& input) {
        const std::string in = certs().file(("s_client-input-" + std::to_string(port)).c_str());
        { std::ofstream(in) << input; }
        std::vector<std::string> a = {
            "-c",       "exec \"$0\" \"$@\" < '" + in + "'", ::getenv(kOpensslEnv), "s_client",
            "-connect", "127.0.0.1:" + std::to_string(port)};
        a.insert(a.end(), options.begin(), options.end());
        return a;
    }
    ChildProcess process;
};

/// Reads through the next '\n' (or to end of stream).
inline Task<std::string> read_line(TlsStream& s) {
    std::string line;
    while (line.empty() || line.back() != '\n') {
        std::string part = co_await read_text(s, 1);
        if (part.empty()) break;
        line += part;
    }
    co_return line;
}

/// More certificates for mutual TLS and reloads, made once per process on first use: client
/// certificates signed by the CA (alice: good, with SANs of every kind; old: expired), one by
/// a second CA nobody trusts (mallory), and a second server certificate (server2, subject
/// "O=reloaded,CN=localhost").
struct MoreCerts {
    MoreCerts() {
        std::ofstream(cnf()) << "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = x\n"
                                "[ca_ext]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign\n"
                                "[client_ext]\nbasicConstraints = CA:FALSE\nextendedKeyUsage = clientAuth\n"
                                "subjectAltName = DNS:alice.example,IP:10.0.0.1,email:alice@example.org,"
                                "URI:spiffe://example.org/alice\n"
                                "[server_ext]\nbasicConstraints = CA:FALSE\nextendedKeyUsage = serverAuth\n"
                                "subjectAltName = IP:127.0.0.1,DNS:localhost\n";
        const Certs& c = certs();
        signed_by(c.ca(), c.ca_key(), "client_ext", "/CN=alice/O=eddy tests", "alice");
        signed_by(c.ca(), c.ca_key(), "server_ext", "/CN=localhost/O=reloaded", "server2");
        openssl({"req", "-new", "-config", cnf(), "-subj", "/CN=old", "-newkey", "ec", "-pkeyopt",
                 "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key("old"), "-out", c.file("old.csr")});
        openssl({"x509", "-req", "-in", c.file("old.csr"), "-CA", c.ca(), "-CAkey", c.ca_key(), "-days", "-1",
                 "-extfile", cnf(), "-extensions", "client_ext", "-out", cert("old")});  // ended yesterday
        signed_by("", "", "ca_ext", "/CN=other CA", "ca2");
        signed_by(cert("ca2"), key("ca2"), "client_ext", "/CN=mallory", "mallory");
    }
    // `name`.pem/.key, signed by ca/ca_key ("": self-signed), valid for two days.
    void signed_by(const std::string& ca, const std::string& ca_key, const char* ext, const char* subject,
                   const char* name) {
        std::vector<std::string> a = {
            "req",    "-x509",   "-config", cnf(),     "-extensions", ext,        "-days",
            "2",      "-subj",   subject,   "-newkey", "ec",          "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", key(name), "-out",    cert(name)};
        if (!ca.empty()) a.insert(a.end(), {"-CA", ca, "-CAkey", ca_key});
        openssl(a);
    }
    static std::string cnf() { return certs().file("mtls.cnf"); }
    static std::string cert(const std::string& name) { return certs().file((name + ".pem").c_str()); }
    static std::string key(const std::string& name) { return certs().file((name + ".key").c_str()); }

    // A client context trusting the CA, presenting `name`'s certificate ("": none).
    static eddy::tls::Context client(const std::string& name) {
        eddy::tls::Context ctx = certs().client();
        if (!name.empty()) ctx.use_certificate(cert(name), key(name));
        return ctx;
    }
    // A server context requiring (or only asking for) a client certificate from the CA.
    static eddy::tls::Context server(bool required = true) {
        eddy::tls::Context ctx = certs().server();
        if (required) ctx.require_client_certificate(certs().ca());
        else ctx.request_client_certificate(certs().ca());
        return ctx;
    }
};

inline const MoreCerts& more_certs() {
    static const MoreCerts m;
    return m;
}

/// One greeting from the server, read by the client (TLS 1.3 tickets arrive with it).
inline Task<TlsPair> greeted_pair(eddy::tls::Context client, eddy::tls::Context server) {
    TlsPair p = co_await tls_pair(std::move(client), std::move(server));
    co_await p.server.write_all(std::string_view("hi\n"));
    CHECK(co_await read_line(p.client) == "hi\n");
    co_return p;
}

inline bool contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

/// The tls::Error a task throws (REQUIREs that it throws one); its code and message.
struct TlsFailure {
    std::error_code code;
    std::string what;
};
template <class T>
Task<TlsFailure> tls_error_of(Task<T> task) {
    try {
        (void)co_await std::move(task);
    } catch (const eddy::tls::Error& e) {
        co_return TlsFailure{e.code(), e.what()};
    }
    co_return TlsFailure{};
}

}  // namespace eddy::test::tls
