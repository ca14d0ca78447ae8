// io/net/unix_addr.cpp: net::UnixAddr (eddy/net/unix_addr.hpp).
#include <eddy/net/unix_addr.hpp>

#include <cstddef>
#include <cstring>
#include <stdexcept>

namespace eddy::net {
namespace {

constexpr std::size_t kRoom = sizeof(sockaddr_un::sun_path);

void check(std::string_view text, std::size_t room, const char* what) {
    if (text.empty()) throw std::invalid_argument(std::string(what) + ": empty");
    if (text.find('\0') != std::string_view::npos)
        throw std::invalid_argument(std::string(what) + ": holds a NUL byte");
    if (text.size() > room)
        throw std::invalid_argument(std::string(what) + ": \"" + std::string(text) + "\" is " +
                                    std::to_string(text.size()) + " bytes, more than the " + std::to_string(room) +
                                    " a Unix socket address holds");
}

}  // namespace

UnixAddr::UnixAddr() noexcept : addr_{}, len_(offsetof(sockaddr_un, sun_path)) { addr_.sun_family = AF_UNIX; }

UnixAddr UnixAddr::path(std::string_view path) {
    check(path, kRoom - 1, "eddy::net::UnixAddr::path");  // room for the terminating NUL
    UnixAddr a;
    std::memcpy(a.addr_.sun_path, path.data(), path.size());
    a.len_ = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
    return a;
}

UnixAddr UnixAddr::abstract(std::string_view name) {
    check(name, kRoom - 1, "eddy::net::UnixAddr::abstract");  // room for the leading NUL
    UnixAddr a;
    std::memcpy(a.addr_.sun_path + 1, name.data(), name.size());
    a.len_ = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    return a;
}

UnixAddr UnixAddr::from_native(const sockaddr* addr, socklen_t len) {
    if (addr->sa_family != AF_UNIX || len > sizeof(sockaddr_un))
        throw std::invalid_argument("eddy::net::UnixAddr::from_native: not a Unix socket address");
    UnixAddr a;
    std::memcpy(&a.addr_, addr, len);
    a.len_ = len;
    return a;
}

std::string UnixAddr::name() const {
    if (is_unnamed()) return {};
    const std::size_t n = len_ - offsetof(sockaddr_un, sun_path);
    if (is_abstract()) return std::string(addr_.sun_path + 1, n - 1);
    return std::string(addr_.sun_path, ::strnlen(addr_.sun_path, n));
}

std::string UnixAddr::to_string() const {
    if (is_unnamed()) return "(unnamed)";
    if (!is_abstract()) return name();
    std::string text = "@";  // appended: "@" + name() trips g++ 12's -Wrestrict false positive
    return text.append(name());
}

bool operator==(const UnixAddr& a, const UnixAddr& b) {
    return a.is_unnamed() == b.is_unnamed() && a.is_abstract() == b.is_abstract() && a.name() == b.name();
}

}  // namespace eddy::net
