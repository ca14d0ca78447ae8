//! eddy/net/unix_addr.hpp: net::UnixAddr, the address of a Unix domain socket: a path in the
//! file system, a Linux abstract name (no file; gone with its last socket), or unnamed (a
//! socket that was never bound, e.g. a client's).
//!
//!     auto a = eddy::net::UnixAddr::path("/run/sidecar.sock");
//!     auto b = eddy::net::UnixAddr::abstract("sidecar");       // to_string(): "@sidecar"
//!
//! A path or name longer than sockaddr_un can hold (107 bytes for a path, 107 for an abstract
//! name) is std::invalid_argument, as is an empty one or one holding a NUL byte.
//! @file
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace eddy::net {

/// The address of a Unix domain socket: a path, an abstract name, or unnamed (see the file
/// comment). Copyable.
class UnixAddr {
public:
    /// Unnamed.
    UnixAddr() noexcept;
    /// A path in the file system (std::invalid_argument: empty, too long, or holding a NUL).
    static UnixAddr path(std::string_view path);
    /// A Linux abstract name, without the leading NUL (std::invalid_argument as for path()).
    static UnixAddr abstract(std::string_view name);
    /// From a kernel sockaddr_un and its length (as accept, recvfrom, getsockname give it).
    static UnixAddr from_native(const sockaddr* addr, socklen_t len);

    bool is_unnamed() const noexcept {
        return len_ <= offsetof(sockaddr_un, sun_path);
    }  ///< no address (a socket that was never bound)
    bool is_abstract() const noexcept { return !is_unnamed() && addr_.sun_path[0] == '\0'; }  ///< a Linux abstract name
    bool is_path() const noexcept { return !is_unnamed() && !is_abstract(); }  ///< a path in the file system
    /// The path, or the abstract name (without its leading NUL), or "" when unnamed.
    std::string name() const;
    /// The path, "@name" for an abstract name, "(unnamed)".
    std::string to_string() const;

    /// For the socket calls: the sockaddr_un and the length that says which kind it is.
    /// @{
    const sockaddr* native() const noexcept { return reinterpret_cast<const sockaddr*>(&addr_); }
    socklen_t native_size() const noexcept { return len_; }
    /// @}

    /// The same kind and the same path or name.
    friend bool operator==(const UnixAddr& a, const UnixAddr& b);

private:
    sockaddr_un addr_;
    socklen_t len_;
};

}  // namespace eddy::net
