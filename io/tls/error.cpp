// io/tls/error.cpp: the "tls" error category (eddy/tls/error.hpp) and the text of OpenSSL's
// error queue that tls::Error messages carry (openssl_error.hpp).
#include <openssl/err.h>

#include <string>
#include <system_error>

#include <eddy/tls/error.hpp>

#include "openssl_error.hpp"

namespace eddy::tls {

namespace {

class Category final : public std::error_category {
public:
    const char* name() const noexcept override { return "tls"; }
    std::string message(int code) const override {
        switch (static_cast<errc>(code)) {
        case errc::protocol:
            return "TLS protocol error";
        case errc::certificate:
            return "TLS peer certificate rejected";
        case errc::truncated:
            return "TLS stream truncated: the peer closed without close_notify";
        case errc::setup:
            return "TLS context setup failed";
        }
        return "unknown TLS error " + std::to_string(code);
    }
};

}  // namespace

const std::error_category& category() noexcept {
    static const Category instance;
    return instance;
}

}  // namespace eddy::tls

namespace eddy::tls::detail {

std::string take_openssl_errors() {
    std::string text;
    while (const unsigned long e = ERR_get_error()) {
        if (!text.empty()) text += "; ";
        const char* reason = ERR_reason_error_string(e);
        if (reason != nullptr) {
            text += reason;
        } else {
            char buf[256];
            ERR_error_string_n(e, buf, sizeof buf);
            text += buf;
        }
    }
    return text;
}

}  // namespace eddy::tls::detail
