//! eddy/net/socket_addr.hpp: net::SocketAddr, an IPv4 or IPv6 address with a port.
//!
//!     auto a = eddy::net::SocketAddr::loopback_v4(8080);          // 127.0.0.1:8080
//!     auto b = eddy::net::SocketAddr::parse("[::1]:443");
//!     b.port();  b.to_string();  b.is_v6();
//! @file
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace eddy::net {

/// An IPv4 or IPv6 address with a port, held as the kernel's sockaddr_storage. Copyable.
class SocketAddr {
public:
    /// No address (family AF_UNSPEC).
    SocketAddr() noexcept;

    // NOLINTBEGIN(bugprone-exception-escape): they build only what from_native accepts
    static SocketAddr loopback_v4(std::uint16_t port = 0) noexcept;  ///< 127.0.0.1
    static SocketAddr loopback_v6(std::uint16_t port = 0) noexcept;  ///< ::1
    static SocketAddr any_v4(std::uint16_t port = 0) noexcept;       ///< 0.0.0.0
    static SocketAddr any_v6(std::uint16_t port = 0) noexcept;       ///< ::
    // NOLINTEND(bugprone-exception-escape)
    /// "a.b.c.d:port" or "[v6]:port". Throws std::invalid_argument naming the bad text.
    static SocketAddr parse(std::string_view text);
    /// From a kernel sockaddr (AF_INET or AF_INET6; std::invalid_argument otherwise).
    static SocketAddr from_native(const sockaddr* addr, socklen_t len);

    bool is_v4() const noexcept { return storage_.ss_family == AF_INET; }   ///< family() == AF_INET
    bool is_v6() const noexcept { return storage_.ss_family == AF_INET6; }  ///< family() == AF_INET6
    int family() const noexcept {
        return storage_.ss_family;
    }                                     ///< AF_INET, AF_INET6, or AF_UNSPEC for a default-constructed one
    std::uint16_t port() const noexcept;  ///< in host byte order; 0 for AF_UNSPEC
    /// "127.0.0.1:8080", "[::1]:443".
    std::string to_string() const;

    /// For the socket calls: the sockaddr and its length for this family.
    /// @{
    const sockaddr* native() const noexcept { return reinterpret_cast<const sockaddr*>(&storage_); }
    socklen_t native_size() const noexcept;
    /// @}

    /// The same family and the same sockaddr bytes: address and port, and for IPv6 the flow
    /// info and scope id too.
    friend bool operator==(const SocketAddr& a, const SocketAddr& b) noexcept;

private:
    sockaddr_storage storage_;
};

}  // namespace eddy::net
