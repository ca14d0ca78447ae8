// io/tls/engine.cpp: one TLS session over memory BIOs (eddy/tls/detail/engine.hpp): the only
// place that calls OpenSSL per byte. Every entry point takes mu_, starts from an empty
// OpenSSL error queue and leaves it empty.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

#include <eddy/tls/detail/engine.hpp>
#include <eddy/tls/error.hpp>

#include "context_state.hpp"
#include "openssl_error.hpp"

namespace eddy::tls::detail {

namespace {

// One TLS record's worth of ciphertext (16 KiB of data plus its header, MAC and padding):
// what the reader asks the stream below for at once.
constexpr std::size_t kInputBuffer = 16 * 1024 + 512;

bool is_ip_address(const std::string& name) {
    unsigned char addr[sizeof(in6_addr)];
    return inet_pton(AF_INET, name.c_str(), addr) == 1 || inet_pton(AF_INET6, name.c_str(), addr) == 1;
}

}  // namespace

Engine::Engine(const Context& ctx, bool server) : ctx_(ctx), in_buf_(kInputBuffer) {
    const char* what = server ? "eddy::tls::Stream::accept" : "eddy::tls::Stream::connect";
    if (ctx.is_server() != server)
        throw Error(errc::setup,
                    std::string(what) + ": the Context is a " + (server ? "client" : "server") + " context");
    ERR_clear_error();
    ssl_ = SSL_new(ctx.native_handle());
    in_ = BIO_new(BIO_s_mem());
    out_ = BIO_new(BIO_s_mem());
    if (ssl_ == nullptr || in_ == nullptr || out_ == nullptr) {
        BIO_free(in_);
        BIO_free(out_);
        SSL_free(ssl_);
        throw Error(errc::setup, std::string(what) + ": " + take_openssl_errors());
    }
    BIO_set_mem_eof_return(in_, -1);  // empty is "retry later" until commit_input(0)
    SSL_set_bio(ssl_, in_, out_);     // ssl_ owns them now
    if (server) SSL_set_accept_state(ssl_);
    else SSL_set_connect_state(ssl_);
}

Engine::~Engine() { SSL_free(ssl_); }

std::unique_ptr<Engine> Engine::client(const Context& ctx, const std::string& server_name) {
    if (server_name.empty())
        throw std::invalid_argument("eddy::tls::Stream::connect: the server name (to verify its certificate) is empty");
    std::unique_ptr<Engine> e(new Engine(ctx, false));
    ERR_clear_error();
    e->server_name_ = server_name;
    SSL_set_app_data(e->ssl_, &e->server_name_);  // the session cache's key (context.cpp)
    if (SSL_SESSION* offer = ctx.state_->take_session(server_name)) {
        SSL_set_session(e->ssl_, offer);  // takes its own reference
        SSL_SESSION_free(offer);
    }
    bool ok;
    if (is_ip_address(server_name)) {
        // No SNI for an address (RFC 6066); the certificate must list it as an IP SAN.
        ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(e->ssl_), server_name.c_str()) == 1;
    } else {
        ok = SSL_set_tlsext_host_name(e->ssl_, server_name.c_str()) == 1 &&
             SSL_set1_host(e->ssl_, server_name.c_str()) == 1;
        SSL_set_hostflags(e->ssl_, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    }
    if (!ok)
        throw Error(errc::setup,
                    "eddy::tls::Stream::connect: server name '" + server_name + "': " + take_openssl_errors());
    return e;
}

std::unique_ptr<Engine> Engine::server(const Context& ctx) { return std::unique_ptr<Engine>(new Engine(ctx, true)); }

Engine::Step Engine::fail(int ret, const char* what) {
    const int code = SSL_get_error(ssl_, ret);
    if (code == SSL_ERROR_WANT_READ) {
        ERR_clear_error();
        return {Status::kWantInput};
    }
    if (code == SSL_ERROR_ZERO_RETURN) {
        ERR_clear_error();
        return {Status::kClosed};
    }
    held_ = false;  // the alert OpenSSL queued goes out (after the tickets, in order)
    const unsigned long first = ERR_peek_error();
    long verify = SSL_get_verify_result(ssl_);
    errc kind = errc::protocol;
    if ((code == SSL_ERROR_SSL && ERR_GET_LIB(first) == ERR_LIB_SSL &&
         ERR_GET_REASON(first) == SSL_R_UNEXPECTED_EOF_WHILE_READING) ||
        (code == SSL_ERROR_SYSCALL && eof_)) {
        kind = errc::truncated;
    } else if (code == SSL_ERROR_SSL && ERR_GET_LIB(first) == ERR_LIB_SSL &&
               ERR_GET_REASON(first) == SSL_R_CERTIFICATE_VERIFY_FAILED && verify != X509_V_OK) {
        kind = errc::certificate;
    } else if (code == SSL_ERROR_SSL && ERR_GET_LIB(first) == ERR_LIB_SSL &&
               ERR_GET_REASON(first) == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE) {
        kind = errc::certificate;  // a server that requires one; the reason says it all
        verify = X509_V_OK;
    }
    std::string reason = take_openssl_errors();
    if (kind == errc::certificate && verify != X509_V_OK)
        reason += std::string(": ") + X509_verify_cert_error_string(verify);
    if (kind == errc::truncated) reason = "the peer closed the connection without close_notify";
    if (reason.empty()) reason = "OpenSSL error " + std::to_string(code);
    failed_ = std::make_exception_ptr(Error(kind, std::string(what) + ": " + reason));
    return {Status::kFailed, 0, failed_};
}

Engine::Step Engine::handshake(const char* what) {
    std::lock_guard lock(mu_);
    if (failed_) return {Status::kFailed, 0, failed_};
    ERR_clear_error();
    const int r = SSL_do_handshake(ssl_);
    if (r == 1) {
        // A TLS 1.3 server's last step (the client's Finished read) queues only its session
        // tickets: held for the first record (engine.hpp, "Session tickets").
        held_ = SSL_is_server(ssl_) == 1 && SSL_version(ssl_) == TLS1_3_VERSION && BIO_ctrl_pending(out_) > 0;
        return {Status::kDone};
    }
    Step s = fail(r, what);
    if (s.status == Status::kClosed) {
        failed_ = std::make_exception_ptr(
            Error(errc::truncated, std::string(what) + ": the peer closed during the handshake"));
        return {Status::kFailed, 0, failed_};
    }
    return s;
}

Engine::Step Engine::read(std::span<std::byte> buf, const char* what) {
    std::lock_guard lock(mu_);
    if (failed_) return {Status::kFailed, 0, failed_};
    ERR_clear_error();
    std::size_t n = 0;
    const int r = SSL_read_ex(ssl_, buf.data(), buf.size(), &n);
    if (r == 1) return {Status::kDone, n};
    return fail(r, what);
}

Engine::Step Engine::write(std::span<const std::byte> data, const char* what) {
    std::lock_guard lock(mu_);
    if (failed_) return {Status::kFailed, 0, failed_};
    if ((SSL_get_shutdown(ssl_) & SSL_SENT_SHUTDOWN) != 0)  // not fatal: reading may go on
        return {Status::kFailed, 0,
                std::make_exception_ptr(Error(errc::protocol, std::string(what) + ": written after shutdown()"))};
    ERR_clear_error();
    held_ = false;  // the tickets go first, in the same send as this record
    std::size_t n = 0;
    const int r = SSL_write_ex(ssl_, data.data(), data.size(), &n);
    if (r == 1) return {Status::kDone, n};
    Step s = fail(r, what);
    if (s.status == Status::kWantInput || s.status == Status::kClosed) {
        // A write never waits for the peer (no renegotiation), so this is a protocol misuse.
        failed_ = std::make_exception_ptr(Error(errc::protocol, std::string(what) + ": the session cannot send now"));
        return {Status::kFailed, 0, failed_};
    }
    return s;
}

Engine::Step Engine::shutdown(const char* what) {
    std::lock_guard lock(mu_);
    if (failed_) return {Status::kFailed, 0, failed_};
    ERR_clear_error();
    held_ = false;
    const int r = SSL_shutdown(ssl_);  // 0: close_notify queued, the peer's not seen yet
    if (r >= 0) return {Status::kDone};
    Step s = fail(r, what);
    return s.status == Status::kFailed ? s : Step{Status::kDone};
}

void Engine::commit_input(std::size_t n) {
    std::lock_guard lock(mu_);
    if (n == 0) {
        eof_ = true;
        BIO_set_mem_eof_return(in_, 0);  // OpenSSL now sees end of stream once the BIO is drained
        return;
    }
    ERR_clear_error();
    if (BIO_write(in_, in_buf_.data(), static_cast<int>(n)) != static_cast<int>(n)) {
        take_openssl_errors();
        throw std::bad_alloc();  // a memory BIO fails only for want of memory
    }
}

std::span<const std::byte> Engine::pending_output() {
    {
        std::lock_guard lock(mu_);
        if (held_) return {};
        const std::size_t pending = BIO_ctrl_pending(out_);
        if (pending > 0) {
            if (out_pos_ == out_buf_.size()) {
                out_buf_.clear();
                out_pos_ = 0;
            }
            const std::size_t at = out_buf_.size();
            out_buf_.resize(at + pending);
            const int got = BIO_read(out_, out_buf_.data() + at, static_cast<int>(pending));
            out_buf_.resize(at + static_cast<std::size_t>(std::max(got, 0)));
        }
    }
    return std::span<const std::byte>(out_buf_).subspan(out_pos_);
}

bool Engine::release_for_wait() {
    std::lock_guard lock(mu_);
    held_ = false;
    return BIO_ctrl_pending(out_) > 0;
}

void Engine::consume_output(std::size_t n) noexcept { out_pos_ = std::min(out_pos_ + n, out_buf_.size()); }

std::string Engine::alpn_protocol() const {
    std::lock_guard lock(mu_);
    const unsigned char* p = nullptr;
    unsigned len = 0;
    SSL_get0_alpn_selected(ssl_, &p, &len);
    return p == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(p), len);
}

}  // namespace eddy::tls::detail

namespace eddy::tls::detail {

std::optional<PeerCertificate> Engine::peer_certificate() const {
    std::lock_guard lock(mu_);
    X509* cert = SSL_get0_peer_certificate(ssl_);
    if (cert == nullptr || !SSL_is_init_finished(ssl_) || SSL_get_verify_result(ssl_) != X509_V_OK) return std::nullopt;
    return describe_certificate(cert);
}

bool Engine::session_resumed() const {
    std::lock_guard lock(mu_);
    return SSL_session_reused(ssl_) == 1;
}

}  // namespace eddy::tls::detail
