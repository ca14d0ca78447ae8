//! eddy/tls/context.hpp: tls::Context, the settings shared by the TLS streams of one side of
//! a service (OpenSSL's SSL_CTX: role, trust store, certificate and key, ALPN, versions).
//!
//!     auto client = eddy::tls::Context::client();                 // system CAs, verification on
//!     auto internal = eddy::tls::Context::client_trusting("ca.pem");  // a private CA only
//!     auto server = eddy::tls::Context::server("cert.pem", "key.pem");
//!     server.set_alpn({"h2", "http/1.1"});
//!
//! A copyable handle: copies share one SSL_CTX (reference-counted), and every Stream keeps the
//! one it was made with alive. Configure it before the first stream uses it; after that it is
//! only read, from any thread, except use_certificate(): a reload, safe at any time.
//! Failures throw tls::Error with errc::setup (OpenSSL's reason in the message: "No such file
//! or directory", "key values mismatch", ...).
//!
//! Defaults: TLS 1.2 at least (OpenSSL's own cipher choice); a client verifies the server's
//! certificate against the system's trust store (and the name given to connect()); a server
//! asks for no client certificate (require_client_certificate(): mutual TLS).
//!
//! Resumption: a server issues session tickets (keys made per Context, stable for its life);
//! a client Context keeps the last session per server name (up to 256 names) and offers it
//! on the next connect() to that name (Stream::session_resumed() says whether it was taken).
//! @file
#pragma once

#include <memory>
#include <string>
#include <vector>

struct ssl_ctx_st;  // OpenSSL's SSL_CTX: no OpenSSL header is needed to use eddy::tls

namespace eddy::tls {

namespace detail {
class Engine;
}

/// A TLS protocol version, for the lowest one a Context accepts.
enum class Version { kTls12, kTls13 };

/// The settings shared by the TLS streams of one side of a connection: certificates, trust,
/// versions, ALPN (see the file comment). Copyable; copies share one SSL_CTX.
class Context {
public:
    /// A client context: peer verification ON, against the system's trust store (OpenSSL's
    /// default paths: SSL_CERT_FILE and SSL_CERT_DIR, else Debian's /etc/ssl/certs). The store
    /// is read once per process and shared by every such context until it adds a CA of its
    /// own (load_verify_file), so a context costs no file reading after the first. tls::Error
    /// (setup) if OpenSSL cannot make one or cannot read the system's CAs.
    static Context client();
    /// A client context that trusts only the CA certificates in the PEM file `ca_pem` (a
    /// private CA): the system's store is never read. Verification ON, as client(). tls::Error
    /// (setup) if the file cannot be read or holds no certificate.
    static Context client_trusting(const std::string& ca_pem);
    /// A server context presenting the PEM certificate chain (leaf first) in `cert_chain_pem`
    /// with the PEM private key in `key_pem`. tls::Error (setup): a file missing or not PEM,
    /// or a key that does not belong to the certificate.
    static Context server(const std::string& cert_chain_pem, const std::string& key_pem);

    /// Trusts the CA certificates in the PEM file `ca_pem` too (a private CA, a test's
    /// throwaway one), in this context only (and its copies). tls::Error (setup) if it cannot
    /// be read or holds no certificate.
    void load_verify_file(const std::string& ca_pem);
    /// ALPN: a client offers `protocols` (in its order of preference); a server picks the
    /// first of its own `protocols` that the client offers (none in common: the handshake
    /// goes on without ALPN). std::invalid_argument for an empty name or one over 255 bytes.
    void set_alpn(const std::vector<std::string>& protocols);
    /// The oldest protocol version accepted (default kTls12).
    void set_min_version(Version v);

    /// The certificate chain (PEM, leaf first) and key this side presents from now on. On a
    /// client: the client certificate, sent when a server asks for one. On a live server
    /// Context, a reload: handshakes that start afterwards present the new pair, streams
    /// already made keep theirs. Thread-safe against handshakes on other threads, any time.
    /// tls::Error (setup): a file missing or not PEM, or a key that does not belong to the
    /// certificate; the pair in force stays.
    void use_certificate(const std::string& cert_chain_pem, const std::string& key_pem);
    /// Server: every client must present a certificate signed by a CA in the PEM file `ca_pem`
    /// (mutual TLS); accept() fails otherwise (tls::Error, certificate: "peer did not return
    /// a certificate", "certificate has expired", "unable to get local issuer certificate").
    /// tls::Error (setup) if the file holds no CA or this is a client Context.
    void require_client_certificate(const std::string& ca_pem);
    /// Server: asks for a client certificate from `ca_pem`'s CAs without requiring one; a
    /// client that sends none is accepted (peer_certificate() is empty), one whose
    /// certificate does not verify is refused. Errors as require_client_certificate().
    void request_client_certificate(const std::string& ca_pem);

    /// The SSL_CTX, for settings this class does not cover (cast to SSL_CTX*).
    ssl_ctx_st* native_handle() const noexcept;
    bool is_server() const noexcept;  ///< made by Context::server(), not client()

    struct State;  ///< the shared state (its definition is private to io/tls/)

private:
    friend class detail::Engine;  // reads the certificate pair and the session cache
    void verify_clients(const std::string& ca_pem, bool required);
    static std::shared_ptr<State> new_state(bool server, const char* what);
    explicit Context(std::shared_ptr<State> state) noexcept : state_(std::move(state)) {}
    std::shared_ptr<State> state_;
};

}  // namespace eddy::tls
