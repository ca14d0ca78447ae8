// io/tls/context_state.hpp: Context::State, what one tls::Context's copies share (its SSL_CTX,
// the certificate pair handed to each handshake, the client's session cache), for
// context.cpp, certificate.cpp and engine.cpp.
//
// # Threads
// The SSL_CTX is configured before the first stream and only read afterwards (SSL_new on any
// worker). Two things change while handshakes run, each behind its own mutex and never by
// touching the SSL_CTX: the certificate pair (use_certificate() swaps a shared_ptr; the
// certificate callback takes the current one into the SSL object being handshaken) and the
// session cache (one session per server name, written by OpenSSL's new-session callback,
// read when a client Engine is made).
#pragma once
#ifndef EDDY_INTERNAL
#error "private eddy header (io/tls/): for eddy's own sources only"
#endif

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <eddy/tls/certificate.hpp>
#include <eddy/tls/context.hpp>

namespace eddy::tls {

namespace detail {

/// A certificate chain (leaf first) and its private key, loaded and checked together;
/// immutable once made, shared by every handshake that took it.
struct CertPair {
    X509* leaf = nullptr;
    stack_st_X509* chain = nullptr;  // the intermediates after the leaf (may be empty)
    EVP_PKEY* key = nullptr;
    CertPair() = default;
    CertPair(const CertPair&) = delete;
    CertPair& operator=(const CertPair&) = delete;
    ~CertPair();
};

/// Reads and checks a pair: tls::Error (setup) naming `what` and the file, with OpenSSL's
/// reason (a missing file, no certificate, a key that does not match).
std::shared_ptr<const CertPair> load_cert_pair(const std::string& cert_chain_pem, const std::string& key_pem,
                                               const std::string& what);

/// The fields of `cert` (a verified peer's leaf), copied out.
PeerCertificate describe_certificate(X509* cert);

/// How many server names a client Context keeps a session for (then one is dropped).
inline constexpr int kMaxCachedSessions = 256;

}  // namespace detail

struct Context::State {
    SSL_CTX* ctx = nullptr;
    bool server = false;
    // A client() Context's trust store is the process's copy of the system's CAs, shared by
    // them all, until load_verify_file gives this one a store of its own (context.cpp).
    bool shared_store = false;
    std::vector<unsigned char> alpn;  // wire format: length-prefixed names; read by select_alpn

    std::mutex cert_mu;
    std::shared_ptr<const detail::CertPair> cert;  // cert_mu: what new handshakes present

    std::mutex cache_mu;
    // cache_mu: the last session per server name, DER-encoded. A copy, not the SSL_SESSION
    // itself: OpenSSL marks a session not resumable when its connection is freed without
    // close_notify, and an object shared between handshakes on several workers is written.
    std::map<std::string, std::vector<unsigned char>> sessions;

    State() = default;
    State(const State&) = delete;
    State& operator=(const State&) = delete;
    ~State();

    std::shared_ptr<const detail::CertPair> current_cert() {
        std::lock_guard lock(cert_mu);
        return cert;
    }
    /// Keeps a copy of `s` as the session to offer `name` next time.
    void store_session(const std::string& name, SSL_SESSION* s);
    /// The session to offer `name` (a new one, the caller frees it), or nullptr.
    SSL_SESSION* take_session(const std::string& name);
};

}  // namespace eddy::tls
