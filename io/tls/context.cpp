// io/tls/context.cpp: tls::Context over an SSL_CTX (eddy/tls/context.hpp).
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <eddy/tls/context.hpp>
#include <eddy/tls/error.hpp>

#include "context_state.hpp"
#include "openssl_error.hpp"

namespace eddy::tls {

Context::State::~State() { SSL_CTX_free(ctx); }

void Context::State::store_session(const std::string& name, SSL_SESSION* s) {
    const int size = i2d_SSL_SESSION(s, nullptr);
    if (size <= 0) return;
    std::vector<unsigned char> der(static_cast<std::size_t>(size));
    unsigned char* at = der.data();
    if (i2d_SSL_SESSION(s, &at) != size) return;
    std::lock_guard lock(cache_mu);
    if (sessions.size() >= static_cast<std::size_t>(detail::kMaxCachedSessions) && !sessions.contains(name))
        sessions.erase(sessions.begin());
    sessions.insert_or_assign(name, std::move(der));
}

SSL_SESSION* Context::State::take_session(const std::string& name) {
    std::vector<unsigned char> der;
    {
        std::lock_guard lock(cache_mu);
        auto it = sessions.find(name);
        if (it == sessions.end()) return nullptr;
        der = it->second;
    }
    const unsigned char* at = der.data();
    SSL_SESSION* s = d2i_SSL_SESSION(nullptr, &at, static_cast<long>(der.size()));
    ERR_clear_error();
    return s;
}

namespace {

[[noreturn]] void throw_setup(const std::string& what) {
    std::string reason = detail::take_openssl_errors();
    throw Error(errc::setup, reason.empty() ? what : what + ": " + reason);
}

// The server's ALPN choice: the first of its own protocols that the client offers.
int select_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned inlen,
                void* arg) {
    const auto* ours = static_cast<const std::vector<unsigned char>*>(arg);
    unsigned char* chosen = nullptr;
    if (SSL_select_next_proto(&chosen, outlen, ours->data(), static_cast<unsigned>(ours->size()), in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = chosen;
    return SSL_TLSEXT_ERR_OK;
}

// At each handshake that needs our certificate (every server handshake; a client's when the
// server asks for one): the Context's current pair, into this SSL object only. The SSL_CTX is
// never written after setup, so use_certificate() may run beside SSL_new on other threads.
int present_certificate(SSL* ssl, void* arg) {
    auto* state = static_cast<Context::State*>(arg);
    const std::shared_ptr<const detail::CertPair> pair = state->current_cert();
    if (!pair) return 1;  // a client without one: it sends none
    return SSL_use_cert_and_key(ssl, pair->leaf, pair->key, pair->chain, 1) == 1 ? 1 : 0;
}

// A client's new session (after a TLS 1.2 handshake; a TLS 1.3 ticket, read after it): kept
// under the name connect() was given (the Engine's, SSL app data), to offer next time.
int keep_session(SSL* ssl, SSL_SESSION* session) {
    const auto* name = static_cast<const std::string*>(SSL_get_app_data(ssl));
    auto* state = static_cast<Context::State*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
    if (name == nullptr || state == nullptr || SSL_SESSION_is_resumable(session) != 1) return 0;
    state->store_session(*name, session);
    return 0;  // the cache keeps a copy: OpenSSL frees this one
}

// The id the server's sessions are bound to: OpenSSL refuses to resume a session of a server
// that verifies clients unless one is set.
constexpr unsigned char kSessionIdContext[] = "eddy::tls";

// The system's CAs as OpenSSL finds them (SSL_CERT_FILE and SSL_CERT_DIR, else Debian's
// /etc/ssl/certs), read once per process: parsing the bundle's ~140 certificates takes tens
// of milliseconds (docs/guide/07-tls.md), and every client Context that adds no CA of its
// own shares this store (SSL_CTX_set1_cert_store, reference-counted, locked by OpenSSL).
// A failure throws, and the next call tries again (a static's initialisation that throws
// did not happen).
X509_STORE* system_store() {
    static X509_STORE* const store = [] {
        ERR_clear_error();
        X509_STORE* s = X509_STORE_new();
        if (s == nullptr || X509_STORE_set_default_paths(s) != 1) {
            X509_STORE_free(s);
            throw_setup("eddy::tls::Context::client: the system CAs");
        }
        return s;
    }();
    return store;
}

// A store of this Context's own holding what `from` holds, plus the system's CA directory
// (looked up by hash when a chain needs it, as the shared store does): where
// load_verify_file adds a CA, so that the shared store never trusts it.
X509_STORE* copy_of(X509_STORE* from, const char* what) {
    X509_STORE* s = X509_STORE_new();
    X509_LOOKUP* dir = s != nullptr ? X509_STORE_add_lookup(s, X509_LOOKUP_hash_dir()) : nullptr;
    bool ok = dir != nullptr && X509_LOOKUP_add_dir(dir, nullptr, X509_FILETYPE_DEFAULT) == 1;
    X509_STORE_lock(from);
    STACK_OF(X509_OBJECT)* objects = X509_STORE_get0_objects(from);
    for (int i = 0; ok && i < sk_X509_OBJECT_num(objects); ++i) {
        X509_OBJECT* o = sk_X509_OBJECT_value(objects, i);
        if (X509* cert = X509_OBJECT_get0_X509(o)) ok = X509_STORE_add_cert(s, cert) == 1;
        else if (X509_CRL* crl = X509_OBJECT_get0_X509_CRL(o)) ok = X509_STORE_add_crl(s, crl) == 1;
    }
    X509_STORE_unlock(from);
    if (!ok) {
        X509_STORE_free(s);
        throw_setup(what);
    }
    return s;
}

}  // namespace

std::shared_ptr<Context::State> Context::new_state(bool server, const char* what) {
    ERR_clear_error();
    auto state = std::make_shared<Context::State>();
    state->server = server;
    state->ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (state->ctx == nullptr) throw_setup(what);
    SSL_CTX_set_min_proto_version(state->ctx, TLS1_2_VERSION);
    // Renegotiation would make a write wait for a read: TLS 1.3 has none, and 1.2's is off.
    SSL_CTX_set_options(state->ctx, SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_app_data(state->ctx, state.get());
    SSL_CTX_set_cert_cb(state->ctx, &present_certificate, state.get());
    if (server) {
        // Tickets are on by default, with keys made for this SSL_CTX: stable for its life.
        SSL_CTX_set_session_id_context(state->ctx, kSessionIdContext, sizeof kSessionIdContext - 1);
    } else {
        SSL_CTX_set_session_cache_mode(state->ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
        SSL_CTX_sess_set_new_cb(state->ctx, &keep_session);
    }
    return state;
}

Context Context::client() {
    X509_STORE* system = system_store();
    auto state = new_state(false, "eddy::tls::Context::client");
    SSL_CTX_set_verify(state->ctx, SSL_VERIFY_PEER, nullptr);
    SSL_CTX_set1_cert_store(state->ctx, system);
    state->shared_store = true;
    return Context(std::move(state));
}

Context Context::client_trusting(const std::string& ca_pem) {
    auto state = new_state(false, "eddy::tls::Context::client_trusting");
    SSL_CTX_set_verify(state->ctx, SSL_VERIFY_PEER, nullptr);
    // The SSL_CTX's own empty store: only the file's CAs go in.
    if (SSL_CTX_load_verify_locations(state->ctx, ca_pem.c_str(), nullptr) != 1)
        throw_setup("eddy::tls::Context::client_trusting: " + ca_pem);
    return Context(std::move(state));
}

Context Context::server(const std::string& cert_chain_pem, const std::string& key_pem) {
    auto state = new_state(true, "eddy::tls::Context::server");
    state->cert = detail::load_cert_pair(cert_chain_pem, key_pem, "eddy::tls::Context::server");
    return Context(std::move(state));
}

void Context::load_verify_file(const std::string& ca_pem) {
    ERR_clear_error();
    const std::string what = "eddy::tls::Context::load_verify_file: " + ca_pem;
    if (state_->shared_store) {
        // The first CA of its own: this Context's store becomes a copy of the system's.
        SSL_CTX_set_cert_store(state_->ctx, copy_of(SSL_CTX_get_cert_store(state_->ctx), what.c_str()));
        state_->shared_store = false;
    }
    if (SSL_CTX_load_verify_locations(state_->ctx, ca_pem.c_str(), nullptr) != 1) throw_setup(what);
}

void Context::use_certificate(const std::string& cert_chain_pem, const std::string& key_pem) {
    auto pair = detail::load_cert_pair(cert_chain_pem, key_pem, "eddy::tls::Context::use_certificate");
    std::lock_guard lock(state_->cert_mu);
    state_->cert = std::move(pair);
}

void Context::verify_clients(const std::string& ca_pem, bool required) {
    const char* what =
        required ? "eddy::tls::Context::require_client_certificate" : "eddy::tls::Context::request_client_certificate";
    if (!state_->server) throw Error(errc::setup, std::string(what) + ": a client context (this is for servers)");
    ERR_clear_error();
    if (SSL_CTX_load_verify_locations(state_->ctx, ca_pem.c_str(), nullptr) != 1)
        throw_setup(std::string(what) + ": " + ca_pem);
    // The CA names the server sends with its request, so a client can pick its certificate.
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(ca_pem.c_str());
    if (names == nullptr) throw_setup(std::string(what) + ": " + ca_pem + ": no CA certificate");
    SSL_CTX_set_client_CA_list(state_->ctx, names);
    SSL_CTX_set_verify(state_->ctx, required ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT : SSL_VERIFY_PEER,
                       nullptr);
}

void Context::require_client_certificate(const std::string& ca_pem) { verify_clients(ca_pem, true); }
void Context::request_client_certificate(const std::string& ca_pem) { verify_clients(ca_pem, false); }

void Context::set_alpn(const std::vector<std::string>& protocols) {
    std::vector<unsigned char> wire;
    for (const std::string& p : protocols) {
        if (p.empty() || p.size() > 255)
            throw std::invalid_argument("eddy::tls::Context::set_alpn: a protocol name must be 1 to 255 bytes, not " +
                                        std::to_string(p.size()));
        wire.push_back(static_cast<unsigned char>(p.size()));
        wire.insert(wire.end(), p.begin(), p.end());
    }
    ERR_clear_error();
    state_->alpn = std::move(wire);
    if (state_->server) {
        SSL_CTX_set_alpn_select_cb(state_->ctx, state_->alpn.empty() ? nullptr : &select_alpn, &state_->alpn);
    } else if (SSL_CTX_set_alpn_protos(state_->ctx, state_->alpn.data(),  // 0 is success here
                                       static_cast<unsigned>(state_->alpn.size())) != 0) {
        throw_setup("eddy::tls::Context::set_alpn");
    }
}

void Context::set_min_version(Version v) {
    SSL_CTX_set_min_proto_version(state_->ctx, v == Version::kTls13 ? TLS1_3_VERSION : TLS1_2_VERSION);
}

ssl_ctx_st* Context::native_handle() const noexcept { return state_->ctx; }
bool Context::is_server() const noexcept { return state_->server; }

}  // namespace eddy::tls
