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

class UnixAddr {
public:
    /// Unnamed.
    UnixAddr() noexcept;
    static UnixAddr path(std::string_view path);
    static UnixAddr abstract(std::string_view name);
    /// From a kernel sockaddr_un and its length (as accept, recvfrom, getsockname give it).
    static UnixAddr from_native(const sockaddr* addr, socklen_t len);

    bool is_unnamed() const noexcept { return len_ <= offsetof(sockaddr_un, sun_path); }
    bool is_abstract() const noexcept { return !is_unnamed() && addr_.sun_path[0] == '\0'; }
    bool is_path() const noexcept { return !is_unnamed() && !is_abstract(); }
    /// The path, or the abstract name (without its leading NUL), or "" when unnamed.
    std::string name() const;
    /// The path, "@name" for an abstract name, "(unnamed)".
    std::string to_string() const;

    const sockaddr* native() const noexcept { return reinterpret_cast<const sockaddr*>(&addr_); }
    socklen_t native_size() const noexcept { return len_; }

    friend bool operator==(const UnixAddr& a, const UnixAddr& b);

private:
    sockaddr_un addr_;
    socklen_t len_;
};

} // namespace eddy::net
