//! eddy/tls/certificate.hpp: tls::PeerCertificate, who is on the other end of a tls::Stream:
//! the fields of the certificate the peer presented and that verified.
//!
//!     if (auto peer = stream.peer_certificate()) {
//!         log(peer->common_name, peer->serial);          // "alice", "1A2B..."
//!         bool ok = std::ranges::count(peer->dns_names, "api.example.com") > 0;
//!     }
//!
//! Plain values, copied out of OpenSSL's certificate: they stay valid after the stream is gone.
//! No errors and no cancellation: it is data.
//! @file
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace eddy::tls {

/// The peer's verified certificate (its leaf), as Stream::peer_certificate() gives it.
struct PeerCertificate {
    /// The subject, one line in RFC 2253 form, most specific first ("CN=alice,O=Example").
    std::string subject;
    /// The subject's common name (CN; "" if it has none).
    std::string common_name;
    /// The issuer, as `subject` (the CA that signed it).
    std::string issuer;
    /// The subject alternative names of type DNS, as written in the certificate.
    std::vector<std::string> dns_names;
    /// The IP address SANs, as text ("127.0.0.1", "::1").
    std::vector<std::string> ip_addresses;
    /// The email (rfc822Name) SANs.
    std::vector<std::string> emails;
    /// The URI SANs ("spiffe://example.org/service").
    std::vector<std::string> uris;
    /// The start and end of validity.
    std::chrono::system_clock::time_point not_before;
    /// The end of validity (past it the certificate is expired).
    std::chrono::system_clock::time_point not_after;
    /// The serial number in upper-case hex, without leading zeros ("1A2B").
    std::string serial;
    /// SHA-256 of the certificate's DER encoding, upper-case hex pairs joined by ':'.
    std::string sha256_fingerprint;
};

}  // namespace eddy::tls
