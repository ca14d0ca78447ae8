// io/net/tcp_connect.cpp: TcpStream::connect("host:port"): a name resolved, then each address
// tried in the resolver's order (net::ConnectError listing them all when none accepts).
#include <eddy/net/connect_error.hpp>
#include <eddy/net/lookup.hpp>
#include <eddy/net/tcp_stream.hpp>

#include <optional>

#include <eddy/tasks/errors.hpp>

namespace eddy::net {
namespace {

std::string describe(const std::string& target, const std::vector<ConnectError::Attempt>& attempts) {
    std::string text = "eddy::net::TcpStream::connect(" + target + "): no address accepted:";
    for (std::size_t i = 0; i < attempts.size(); ++i)
        text += (i == 0 ? " " : "; ") + attempts[i].address.to_string() + ": " + attempts[i].error.message();
    return text;
}

}  // namespace

ConnectError::ConnectError(const std::string& target, std::vector<Attempt> attempts)
    : std::system_error(
          attempts.empty() ? std::make_error_code(std::errc::address_not_available) : attempts.back().error,
          describe(target, attempts)),
      attempts_(std::move(attempts)) {}

Task<TcpStream> TcpStream::connect(std::string_view host_port, std::stop_token token) {
    const std::string target(host_port);
    const std::vector<SocketAddr> addrs = co_await lookup_host(target);
    std::vector<ConnectError::Attempt> attempts;
    for (const SocketAddr& a : addrs) {
        std::optional<TcpStream> s;
        try {
            s.emplace(co_await connect(a, token));
        } catch (const OperationCancelled&) {
            throw;  // cancelled: no further attempts
        } catch (const std::system_error& e) {
            attempts.push_back({a, e.code()});
        }
        if (s) co_return std::move(*s);
    }
    throw ConnectError(target, std::move(attempts));
}

}  // namespace eddy::net
