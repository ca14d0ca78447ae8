//! eddy/tls/context.hpp: tls::Context, the settings shared by the TLS streams of one side of
//! a service (OpenSSL's SSL_CTX: role, trust store, certificate and key, ALPN, versions).
//!
//!     auto client = eddy::tls::Context::client();                 // system CAs, verification on
//!     auto server = eddy::tls::Context::server("cert.pem", "key.pem");
//!     server.set_alpn({"h2", "http/1.1"});
//!
//! A copyable handle: copies share one SSL_CTX (reference-counted), and every Stream keeps the
//! one it was made with alive. Configure it before the first stream uses it; after that it is
//! only read, from any thread. Failures throw tls::Error with errc::setup (OpenSSL's reason
//! in the message: "No such file or directory", "key values mismatch", ...).
//!
//! Defaults: TLS 1.2 at least (OpenSSL's own cipher choice); a client verifies the server's
//! certificate against the system's trust store (and the name given to connect()); a server
//! asks for no client certificate.
//! @file
#pragma once

#include <memory>
#include <string>
#include <vector>

struct ssl_ctx_st;  // OpenSSL's SSL_CTX: no OpenSSL header is needed to use eddy::tls

namespace eddy::tls {

/// A TLS protocol version, for the lowest one a Context accepts.
enum class Version { kTls12, kTls13 };

/// The settings shared by the TLS streams of one side of a connection: certificates, trust,
/// versions, ALPN (see the file comment). Copyable; copies share one SSL_CTX.
class Context {
public:
    /// A client context: peer verification ON, against the system's default CA paths
    /// (Debian: /etc/ssl/certs). tls::Error (setup) if OpenSSL cannot make one.
    static Context client();
    /// A server context presenting the PEM certificate chain (leaf first) in `cert_chain_pem`
    /// with the PEM private key in `key_pem`. tls::Error (setup): a file missing or not PEM,
    /// or a key that does not belong to the certificate.
    static Context server(const std::string& cert_chain_pem, const std::string& key_pem);

    /// Trusts the CA certificates in the PEM file `ca_pem` too (a private CA, a test's
    /// throwaway one). tls::Error (setup) if it cannot be read or holds no certificate.
    void load_verify_file(const std::string& ca_pem);
    /// ALPN: a client offers `protocols` (in its order of preference); a server picks the
    /// first of its own `protocols` that the client offers (none in common: the handshake
    /// goes on without ALPN). std::invalid_argument for an empty name or one over 255 bytes.
    void set_alpn(const std::vector<std::string>& protocols);
    /// The oldest protocol version accepted (default kTls12).
    void set_min_version(Version v);

    /// The SSL_CTX, for settings this class does not cover (cast to SSL_CTX*).
    ssl_ctx_st* native_handle() const noexcept;
    bool is_server() const noexcept;  ///< made by Context::server(), not client()

private:
    struct State;
    static std::shared_ptr<State> new_state(bool server, const char* what);
    explicit Context(std::shared_ptr<State> state) noexcept : state_(std::move(state)) {}
    std::shared_ptr<State> state_;
};

}  // namespace eddy::tls
