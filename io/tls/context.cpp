// io/tls/context.cpp: tls::Context over an SSL_CTX (eddy/tls/context.hpp).
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <eddy/tls/context.hpp>
#include <eddy/tls/error.hpp>

#include "openssl_error.hpp"

namespace eddy::tls {

struct Context::State {
    SSL_CTX* ctx = nullptr;
    bool server = false;
    std::vector<unsigned char> alpn;  // wire format: length-prefixed names; read by select_alpn
    State() = default;
    State(const State&) = delete;
    State& operator=(const State&) = delete;
    ~State() { SSL_CTX_free(ctx); }
};

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
    return state;
}

Context Context::client() {
    auto state = new_state(false, "eddy::tls::Context::client");
    SSL_CTX_set_verify(state->ctx, SSL_VERIFY_PEER, nullptr);
    if (SSL_CTX_set_default_verify_paths(state->ctx) != 1) throw_setup("eddy::tls::Context::client: the system CAs");
    return Context(std::move(state));
}

Context Context::server(const std::string& cert_chain_pem, const std::string& key_pem) {
    auto state = new_state(true, "eddy::tls::Context::server");
    if (SSL_CTX_use_certificate_chain_file(state->ctx, cert_chain_pem.c_str()) != 1)
        throw_setup("eddy::tls::Context::server: certificate " + cert_chain_pem);
    if (SSL_CTX_use_PrivateKey_file(state->ctx, key_pem.c_str(), SSL_FILETYPE_PEM) != 1)
        throw_setup("eddy::tls::Context::server: key " + key_pem);
    if (SSL_CTX_check_private_key(state->ctx) != 1)
        throw_setup("eddy::tls::Context::server: key " + key_pem + " and certificate " + cert_chain_pem);
    return Context(std::move(state));
}

void Context::load_verify_file(const std::string& ca_pem) {
    ERR_clear_error();
    if (SSL_CTX_load_verify_locations(state_->ctx, ca_pem.c_str(), nullptr) != 1)
        throw_setup("eddy::tls::Context::load_verify_file: " + ca_pem);
}

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
