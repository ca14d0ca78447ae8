// io/net/lookup.cpp: net::lookup_host (eddy/net/lookup.hpp).
#include <eddy/net/lookup.hpp>

#include <arpa/inet.h>
#include <netdb.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <memory>
#include <stdexcept>

#include <eddy/runtime/spawn_blocking.hpp>

namespace eddy::net {
namespace {

std::atomic<std::uint64_t> g_resolver_calls{0};  // a statistic: relaxed, nothing pairs with it

class ResolverCategory final : public std::error_category {
public:
    const char* name() const noexcept override { return "getaddrinfo"; }
    std::string message(int code) const override { return ::gai_strerror(code); }
};

/// A numeric address, or nullopt for a name.
std::optional<SocketAddr> numeric(const std::string& host, std::uint16_t port) {
    in_addr v4{};
    if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr = v4;
        return SocketAddr::from_native(reinterpret_cast<const sockaddr*>(&a), sizeof a);
    }
    in6_addr v6{};
    if (::inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_port = htons(port);
        a.sin6_addr = v6;
        return SocketAddr::from_native(reinterpret_cast<const sockaddr*>(&a), sizeof a);
    }
    return std::nullopt;
}

/// getaddrinfo itself (on a blocking-pool thread).
std::vector<SocketAddr> resolve(const std::string& host, std::uint16_t port) {
    g_resolver_calls.fetch_add(1, std::memory_order_relaxed);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;  // one entry per address, not one per socket type
    addrinfo* list = nullptr;
    const std::string service = std::to_string(port);
    const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &list);
    if (rc == EAI_SYSTEM) throw ResolveError(std::error_code(errno, std::system_category()), host);
    if (rc != 0) throw ResolveError(std::error_code(rc, resolver_category()), host);
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(list, &::freeaddrinfo);
    std::vector<SocketAddr> out;
    for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
        if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
        SocketAddr a = SocketAddr::from_native(ai->ai_addr, ai->ai_addrlen);
        if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
    }
    if (out.empty()) throw ResolveError(std::error_code(EAI_NONAME, resolver_category()), host);
    return out;
}

}  // namespace

const std::error_category& resolver_category() noexcept {
    static const ResolverCategory category;
    return category;
}

ResolveError::ResolveError(std::error_code code, std::string host)
    : std::system_error(code, "eddy::net::lookup_host(" + host + ")"), host_(std::move(host)) {}

}  // namespace eddy::net

namespace eddy::detail {

std::uint64_t resolver_calls() noexcept { return net::g_resolver_calls.load(std::memory_order_relaxed); }

HostPort split_host_port(std::string_view text, const char* what) {
    const auto bad = [&](const char* why) {
        throw std::invalid_argument(std::string(what) + ": \"" + std::string(text) + "\": " + why);
    };
    std::string_view host, port;
    if (!text.empty() && text.front() == '[') {
        const std::size_t close = text.find(']');
        if (close == std::string_view::npos) bad("'[' without ']'");
        host = text.substr(1, close - 1);
        if (close + 1 >= text.size() || text[close + 1] != ':') bad("no port after ']' (want [v6]:port)");
        port = text.substr(close + 2);
    } else {
        const std::size_t colon = text.rfind(':');
        if (colon == std::string_view::npos) bad("no port (want host:port)");
        host = text.substr(0, colon);
        if (host.find(':') != std::string_view::npos) bad("an IPv6 address needs brackets ([v6]:port)");
        port = text.substr(colon + 1);
    }
    if (host.empty()) bad("no host");
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc{} || end != port.data() + port.size() || value > 65535)
        bad("the port must be a number from 0 to 65535");
    return HostPort{std::string(host), static_cast<std::uint16_t>(value)};
}

}  // namespace eddy::detail

namespace eddy::net {

Task<std::vector<SocketAddr>> lookup_host(std::string_view host, std::uint16_t port) {
    std::string name(host);
    if (name.empty()) throw std::invalid_argument("eddy::net::lookup_host: an empty host name");
    if (auto a = numeric(name, port)) co_return std::vector<SocketAddr>{*a};
    // The handle first, then the co_await: g++ 12 destroys a lambda with an init-capture
    // twice when the lambda is a temporary inside a co_await expression.
    auto call = eddy::spawn_blocking([name = std::move(name), port] { return resolve(name, port); });
    co_return co_await std::move(call);
}

Task<std::vector<SocketAddr>> lookup_host(std::string_view host_port) {
    auto hp = eddy::detail::split_host_port(host_port, "eddy::net::lookup_host");
    co_return co_await lookup_host(hp.host, hp.port);
}

}  // namespace eddy::net
