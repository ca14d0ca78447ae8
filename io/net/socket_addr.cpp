// io/net/socket_addr.cpp
#include <eddy/net/socket_addr.hpp>

#include <arpa/inet.h>

#include <charconv>
#include <cstring>
#include <stdexcept>

namespace eddy::net {
namespace {

// NOLINTBEGIN(bugprone-exception-escape): from_native throws only for a family or a length
// these never pass
SocketAddr make_v4(std::uint32_t host_order_ip, std::uint16_t port) noexcept {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(host_order_ip);
    return SocketAddr::from_native(reinterpret_cast<const sockaddr*>(&a), sizeof a);
}

SocketAddr make_v6(const in6_addr& ip, std::uint16_t port) noexcept {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    a.sin6_addr = ip;
    return SocketAddr::from_native(reinterpret_cast<const sockaddr*>(&a), sizeof a);
}
// NOLINTEND(bugprone-exception-escape)

[[noreturn]] void bad(std::string_view text, const char* why) {
    throw std::invalid_argument("eddy::net::SocketAddr::parse: \"" + std::string(text) + "\": " + why);
}

}  // namespace

SocketAddr::SocketAddr() noexcept : storage_{} { storage_.ss_family = AF_UNSPEC; }

// NOLINTBEGIN(bugprone-exception-escape): see make_v4
SocketAddr SocketAddr::loopback_v4(std::uint16_t port) noexcept { return make_v4(INADDR_LOOPBACK, port); }
SocketAddr SocketAddr::loopback_v6(std::uint16_t port) noexcept { return make_v6(in6addr_loopback, port); }
SocketAddr SocketAddr::any_v4(std::uint16_t port) noexcept { return make_v4(INADDR_ANY, port); }
SocketAddr SocketAddr::any_v6(std::uint16_t port) noexcept { return make_v6(in6addr_any, port); }
// NOLINTEND(bugprone-exception-escape)

SocketAddr SocketAddr::parse(std::string_view text) {
    if (text.find('\0') != std::string_view::npos) bad(text, "contains a NUL character");
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) bad(text, "no ':port'");
    std::string_view host = text.substr(0, colon);
    const std::string_view port_text = text.substr(colon + 1);
    unsigned port = 0;
    const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc{} || end != port_text.data() + port_text.size() || port > 65535 || port_text.empty())
        bad(text, "the port is not a number in 0..65535");
    const bool v6 = host.size() >= 2 && host.front() == '[' && host.back() == ']';
    if (v6) host = host.substr(1, host.size() - 2);
    const std::string h(host);
    if (v6) {
        in6_addr ip{};
        if (inet_pton(AF_INET6, h.c_str(), &ip) != 1) bad(text, "not an IPv6 address");
        return make_v6(ip, static_cast<std::uint16_t>(port));
    }
    in_addr ip{};
    if (inet_pton(AF_INET, h.c_str(), &ip) != 1) bad(text, "not an IPv4 address (IPv6 goes in brackets)");
    return make_v4(ntohl(ip.s_addr), static_cast<std::uint16_t>(port));
}

SocketAddr SocketAddr::from_native(const sockaddr* addr, socklen_t len) {
    SocketAddr s;
    if (addr->sa_family == AF_INET && len >= static_cast<socklen_t>(sizeof(sockaddr_in)))
        std::memcpy(&s.storage_, addr, sizeof(sockaddr_in));
    else if (addr->sa_family == AF_INET6 && len >= static_cast<socklen_t>(sizeof(sockaddr_in6)))
        std::memcpy(&s.storage_, addr, sizeof(sockaddr_in6));
    else throw std::invalid_argument("eddy::net::SocketAddr: not an IPv4 or IPv6 socket address");
    return s;
}

std::uint16_t SocketAddr::port() const noexcept {
    if (is_v4()) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
    if (is_v6()) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
    return 0;
}

socklen_t SocketAddr::native_size() const noexcept {
    return is_v4() ? sizeof(sockaddr_in) : is_v6() ? sizeof(sockaddr_in6) : sizeof(sa_family_t);
}

std::string SocketAddr::to_string() const {
    // Built with append(): GCC 12 at -O3 flags `"[" + std::string(...)` with a false -Wrestrict.
    char buf[INET6_ADDRSTRLEN] = {};
    std::string out;
    if (is_v4()) {
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, buf, sizeof buf);
        out.append(buf);
    } else if (is_v6()) {
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr, buf, sizeof buf);
        out.append("[").append(buf).append("]");
    } else {
        return "(unspecified)";
    }
    out.append(":").append(std::to_string(port()));
    return out;
}

bool operator==(const SocketAddr& a, const SocketAddr& b) noexcept {
    return a.family() == b.family() && a.native_size() == b.native_size() &&
           (a.family() == AF_UNSPEC || std::memcmp(a.native(), b.native(), a.native_size()) == 0);
}

}  // namespace eddy::net
