// io/tls/certificate.cpp: certificates as files and as fields: loading a chain and key for
// Context::use_certificate (context_state.hpp) and describing a peer's certificate for
// Stream::peer_certificate (eddy/tls/certificate.hpp).
#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>

#include <eddy/tls/certificate.hpp>
#include <eddy/tls/error.hpp>

#include "context_state.hpp"
#include "openssl_error.hpp"

namespace eddy::tls::detail {

CertPair::~CertPair() {
    X509_free(leaf);
    sk_X509_pop_free(chain, X509_free);
    EVP_PKEY_free(key);
}

namespace {

[[noreturn]] void throw_setup(const std::string& what) {
    std::string reason = take_openssl_errors();
    throw Error(errc::setup, reason.empty() ? what : what + ": " + reason);
}

struct BioDeleter {
    void operator()(BIO* b) const noexcept { BIO_free(b); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;

BioPtr open_file(const std::string& path, const std::string& what) {
    BioPtr b(BIO_new_file(path.c_str(), "r"));
    if (!b) throw_setup(what + " " + path);
    return b;
}

std::string name_text(const X509_NAME* name) {
    BioPtr b(BIO_new(BIO_s_mem()));
    if (!b || X509_NAME_print_ex(b.get(), name, 0, XN_FLAG_RFC2253) < 0) return {};
    char* data = nullptr;
    const long n = BIO_get_mem_data(b.get(), &data);
    return n > 0 ? std::string(data, static_cast<std::size_t>(n)) : std::string();
}

std::string asn1_text(const ASN1_STRING* s) {
    return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                       static_cast<std::size_t>(ASN1_STRING_length(s)));
}

std::chrono::system_clock::time_point time_of(const ASN1_TIME* t) {
    std::tm tm{};
    if (ASN1_TIME_to_tm(t, &tm) != 1) return {};
    return std::chrono::system_clock::from_time_t(timegm(&tm));
}

std::string hex(const unsigned char* p, std::size_t n, bool colons) {
    std::string out;
    for (std::size_t i = 0; i < n; ++i) {
        char b[4];
        std::snprintf(b, sizeof b, "%02X", p[i]);
        if (colons && i > 0) out += ':';
        out += b;
    }
    return out;
}

}  // namespace

std::shared_ptr<const CertPair> load_cert_pair(const std::string& cert_chain_pem, const std::string& key_pem,
                                               const std::string& what) {
    ERR_clear_error();
    auto pair = std::make_shared<CertPair>();
    BioPtr cert_file = open_file(cert_chain_pem, what + ": certificate");
    pair->leaf = PEM_read_bio_X509_AUX(cert_file.get(), nullptr, nullptr, nullptr);
    if (pair->leaf == nullptr) throw_setup(what + ": certificate " + cert_chain_pem + ": no PEM certificate");
    pair->chain = sk_X509_new_null();
    if (pair->chain == nullptr) throw_setup(what);
    while (X509* ca = PEM_read_bio_X509(cert_file.get(), nullptr, nullptr, nullptr)) {
        if (sk_X509_push(pair->chain, ca) == 0) {
            X509_free(ca);
            throw_setup(what);
        }
    }
    ERR_clear_error();  // the end of the file reads as "no start line"
    BioPtr key_file = open_file(key_pem, what + ": key");
    pair->key = PEM_read_bio_PrivateKey(key_file.get(), nullptr, nullptr, nullptr);
    if (pair->key == nullptr) throw_setup(what + ": key " + key_pem + ": no PEM private key");
    if (X509_check_private_key(pair->leaf, pair->key) != 1)
        throw_setup(what + ": key " + key_pem + " and certificate " + cert_chain_pem);
    return pair;
}

PeerCertificate describe_certificate(X509* cert) {
    PeerCertificate p;
    p.subject = name_text(X509_get_subject_name(cert));
    p.issuer = name_text(X509_get_issuer_name(cert));
    const X509_NAME* subject = X509_get_subject_name(cert);
    const int cn = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
    if (cn >= 0) p.common_name = asn1_text(X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, cn)));
    auto* sans = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
    for (int i = 0; sans != nullptr && i < sk_GENERAL_NAME_num(sans); ++i) {
        const GENERAL_NAME* g = sk_GENERAL_NAME_value(sans, i);
        if (g->type == GEN_DNS) p.dns_names.push_back(asn1_text(g->d.dNSName));
        else if (g->type == GEN_EMAIL) p.emails.push_back(asn1_text(g->d.rfc822Name));
        else if (g->type == GEN_URI) p.uris.push_back(asn1_text(g->d.uniformResourceIdentifier));
        else if (g->type == GEN_IPADD) {
            const int len = ASN1_STRING_length(g->d.iPAddress);
            char text[INET6_ADDRSTRLEN] = {};
            if ((len == 4 || len == 16) &&
                inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(g->d.iPAddress), text, sizeof text))
                p.ip_addresses.emplace_back(text);
        }
    }
    GENERAL_NAMES_free(sans);
    p.not_before = time_of(X509_get0_notBefore(cert));
    p.not_after = time_of(X509_get0_notAfter(cert));
    if (BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr)) {
        if (char* h = BN_bn2hex(bn)) {
            p.serial = h;
            OPENSSL_free(h);
        }
        BN_free(bn);
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned md_len = 0;
    if (X509_digest(cert, EVP_sha256(), md, &md_len) == 1) p.sha256_fingerprint = hex(md, md_len, true);
    ERR_clear_error();
    return p;
}

}  // namespace eddy::tls::detail
