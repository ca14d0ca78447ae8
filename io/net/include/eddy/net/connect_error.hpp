//! eddy/net/connect_error.hpp: net::ConnectError, what TcpStream::connect("host:port") throws
//! when no address of the host accepted: a std::system_error whose code is the last attempt's
//! errno and whose what() lists every address tried with its error, e.g.
//!     eddy::net::TcpStream::connect(localhost:1): no address accepted:
//!     [::1]:1: Connection refused; 127.0.0.1:1: Connection refused
//! @file
#pragma once

#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <eddy/net/socket_addr.hpp>

namespace eddy::net {

/// What TcpStream::connect("host:port") throws when no address accepted (see the file
/// comment): code() is the last attempt's errno, attempts() lists them all.
class ConnectError : public std::system_error {
public:
    /// One address tried.
    struct Attempt {
        SocketAddr address;     ///< the address
        std::error_code error;  ///< why it failed (ECONNREFUSED, ETIMEDOUT, ...)
    };
    /// The error for `target` ("host:port") and the addresses tried, in order (at least one).
    ConnectError(const std::string& target, std::vector<Attempt> attempts);
    /// Every address tried, in order, with its error.
    const std::vector<Attempt>& attempts() const noexcept { return attempts_; }

private:
    std::vector<Attempt> attempts_;
};

}  // namespace eddy::net
