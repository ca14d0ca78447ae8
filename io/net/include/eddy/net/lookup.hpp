//! eddy/net/lookup.hpp: host names to addresses, through the system resolver.
//!
//!     std::vector<eddy::net::SocketAddr> addrs = co_await eddy::net::lookup_host("example.com:443");
//!     auto s = co_await eddy::net::TcpStream::connect("example.com:443");   // each in turn
//!
//! getaddrinfo(3) is the resolver a service on this machine already trusts: it reads
//! /etc/hosts, nsswitch.conf and resolv.conf, as every other program does. It blocks, so it
//! runs on the runtime's blocking pool (eddy::spawn_blocking), never on a worker; it cannot be
//! cancelled once started (the task still can: it then waits for the call to end). Numeric
//! addresses ("10.0.0.1:80", "[::1]:8080") never reach the resolver.
//!
//! Errors: a text that is not "host:port" or "[v6]:port" with a port of 0..65535 is
//! std::invalid_argument. A name that does not resolve is net::ResolveError, a
//! std::system_error in the "getaddrinfo" category (code().value() is the EAI_* value, the
//! message gai_strerror's; EAI_SYSTEM carries the errno in the system category instead), naming
//! the host.
//! @file
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <eddy/net/socket_addr.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::net {

/// The category of getaddrinfo's EAI_* codes (name "getaddrinfo").
const std::error_category& resolver_category() noexcept;

/// A name that did not resolve: code() is the EAI_* value in resolver_category() (or the
/// errno for EAI_SYSTEM), what() names the host.
class ResolveError : public std::system_error {
public:
    /// The error `code` for `host`.
    ResolveError(std::error_code code, std::string host);
    /// The name that did not resolve.
    const std::string& host() const noexcept { return host_; }

private:
    std::string host_;
};

/// Every address of "host:port" ("name:443", "10.0.0.1:80", "[::1]:8080"), in the
/// resolver's order, without repeats.
Task<std::vector<SocketAddr>> lookup_host(std::string_view host_port);
/// Every address of `host` ("example.com", "10.0.0.1", "::1"; no brackets needed) with `port`.
Task<std::vector<SocketAddr>> lookup_host(std::string_view host, std::uint16_t port);

}  // namespace eddy::net

// Not for users (no stability promise); in eddy::detail, as a detail namespace inside
// eddy::net would hide eddy::detail from every header of eddy::net.
namespace eddy::detail {
/// How many times this process called getaddrinfo through lookup_host (for tests: numeric
/// addresses must not).
std::uint64_t resolver_calls() noexcept;
/// "host:port" split; std::invalid_argument naming `what` when it is not one.
struct HostPort {
    std::string host;
    std::uint16_t port;
};
HostPort split_host_port(std::string_view text, const char* what);
}  // namespace eddy::detail
