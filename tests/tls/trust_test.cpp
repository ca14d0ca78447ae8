// tests/tls/trust_test.cpp: where a client Context's trust comes from. client() shares one
// store of the system's CAs, read once per process; a CA that load_verify_file adds goes into
// that context's own copy, never into the shared store; client_trusting() trusts its file
// alone and never reads the system's store.
#include <doctest/doctest.h>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <string>

#include "tls_helpers.hpp"

using namespace eddy::test::tls;
namespace tls = eddy::tls;

namespace {

X509_STORE* store_of(const tls::Context& c) { return SSL_CTX_get_cert_store(c.native_handle()); }

/// The certificates a store holds in memory (a hashed directory's are read only on demand).
int certificates_in(X509_STORE* s) {
    int n = 0;
    X509_STORE_lock(s);
    STACK_OF(X509_OBJECT)* objects = X509_STORE_get0_objects(s);
    for (int i = 0; i < sk_X509_OBJECT_num(objects); ++i)
        if (X509_OBJECT_get_type(sk_X509_OBJECT_value(objects, i)) == X509_LU_X509) ++n;
    X509_STORE_unlock(s);
    return n;
}

/// A handshake of a client with `client_ctx` against the test server: the client's failure
/// (code 0 when it succeeded).
TlsFailure handshake(const tls::Context& client_ctx) {
    auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    Runtime rt(RuntimeConfig{.workers = 1});
    return run(rt, [](TcpListener& l, tls::Context c) -> Task<TlsFailure> {
        auto [client, server] = co_await eddy::when_all(tls_error_of(connect_tls(l.local_address(), c)),
                                                        tls_error_of(accept_tls(l, certs().server())));
        (void)server;  // refused by the client when it does not trust the certificate
        co_return client;
    }(listener, client_ctx));
}

std::string setup_error_of(void (*make)()) {
    try {
        make();
    } catch (const tls::Error& e) {
        CHECK(e.code() == tls::errc::setup);
        return e.what();
    }
    FAIL("no tls::Error");
    return {};
}

}  // namespace

TEST_CASE("client() contexts share one store of the system's CAs") {
    openssl_program();
    const tls::Context a = tls::Context::client();
    const tls::Context b = tls::Context::client();
    CHECK(a.native_handle() != b.native_handle());
    CHECK(store_of(a) == store_of(b));
    // Without the private CA the test server's certificate is not trusted.
    const TlsFailure f = handshake(b);
    CHECK(f.code == tls::errc::certificate);
}

TEST_CASE("a CA added to one client context is trusted by that context only") {
    openssl_program();
    tls::Context with_ca = tls::Context::client();
    X509_STORE* const shared = store_of(with_ca);
    const int system_count = certificates_in(shared);
    with_ca.load_verify_file(certs().ca());
    const tls::Context copy = with_ca;  // copies share the context, and so its store
    CHECK(store_of(with_ca) != shared);
    CHECK(store_of(copy) == store_of(with_ca));
    CHECK(certificates_in(store_of(with_ca)) == system_count + 1);
    CHECK(certificates_in(shared) == system_count);
    const tls::Context later = tls::Context::client();
    CHECK(store_of(later) == shared);

    CHECK(handshake(with_ca).code == std::error_code{});
    CHECK(handshake(later).code == tls::errc::certificate);
}

TEST_CASE("client_trusting() trusts its file's CAs and nothing else") {
    openssl_program();
    const tls::Context c = tls::Context::client_trusting(certs().ca());
    CHECK(store_of(c) != store_of(tls::Context::client()));
    CHECK(certificates_in(store_of(c)) == 1);
    CHECK(handshake(c).code == std::error_code{});
    // A file whose certificate is not the server's issuer (the server's own, which is no CA)
    // does not make the server trusted.
    const tls::Context other = tls::Context::client_trusting(certs().server_cert());
    CHECK(certificates_in(store_of(other)) == 1);
    CHECK(handshake(other).code == tls::errc::certificate);
}

TEST_CASE("client_trusting() refuses a file it cannot read or that holds no certificate") {
    openssl_program();
    CHECK(contains(setup_error_of([] { tls::Context::client_trusting(certs().file("missing.pem")); }),
                   "eddy::tls::Context::client_trusting: "));
    CHECK(contains(setup_error_of([] { tls::Context::client_trusting(certs().server_key()); }),
                   "eddy::tls::Context::client_trusting: "));
}
