//! eddy/tls/error.hpp: tls::Error, how a TLS failure reaches the awaiting task, and
//! tls::errc, what kind of failure it was.
//!
//!     try {
//!         auto s = co_await eddy::tls::Stream<eddy::net::TcpStream>::connect(ctx, std::move(tcp), "example.com");
//!     } catch (const eddy::tls::Error& e) {
//!         if (e.code() == eddy::tls::errc::certificate) ...   // e.what(): "...: certificate verify
//!     }                                                       // failed: self-signed certificate: ..."
//!
//! A tls::Error is a std::system_error in the "tls" category; its message carries OpenSSL's
//! own reason (taken from the thread's OpenSSL error queue, which is then left empty). Errors
//! of the stream below TLS (ECONNRESET, EPIPE, ...) are not translated: they stay
//! std::system_error with the errno, and a cancelled operation throws eddy::OperationCancelled.
//! @file
#pragma once

#include <string>
#include <system_error>
#include <type_traits>

namespace eddy::tls {

/// What went wrong. The values are the error codes of tls::category().
enum class errc {
    /// The TLS protocol failed: a handshake the peer refused (it sent an alert, e.g. "tlsv1
    /// alert unknown ca" when it did not trust our certificate), no common version or cipher,
    /// a malformed or forged record, data written after shutdown().
    protocol = 1,
    /// The peer's certificate was not accepted: not signed by a trusted CA, expired, or not
    /// for the name (or IP address) that connect() was given; or a server that requires a
    /// client certificate got none ("peer did not return a certificate").
    certificate = 2,
    /// The peer closed the connection without a close_notify alert, so the data may have been
    /// cut short by an attacker (or the peer crashed). A clean close gives read() == 0 instead.
    truncated = 3,
    /// A Context could not be set up: a certificate, key or CA file that cannot be read or
    /// parsed, a key that does not match its certificate, a bad ALPN list.
    setup = 4,
};

/// The "tls" error category.
const std::error_category& category() noexcept;

/// Makes tls::errc usable as a std::error_code (`e.code() == tls::errc::certificate`).
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), category()}; }

/// A TLS failure: code() is one of tls::errc in tls::category(); what() says where, OpenSSL's
/// reason, and the kind.
class Error : public std::system_error {
public:
    /// An error of kind `e`; `what` says where, with OpenSSL's reason.
    Error(errc e, const std::string& what) : std::system_error(make_error_code(e), what) {}
};

}  // namespace eddy::tls

template <>
struct std::is_error_code_enum<eddy::tls::errc> : std::true_type {};
