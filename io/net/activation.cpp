// io/net/activation.cpp: net::listen_fds() (eddy/net/activation.hpp).
#include <eddy/net/activation.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <system_error>

namespace eddy::net {
namespace {

constexpr const char* kWhat = "eddy::net::listen_fds";

/// A decimal number in [0, max], or nullopt.
std::optional<long> parse_decimal(std::string_view text, long max) {
    long n = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || n < 0 || n > max) return std::nullopt;
    return n;
}

std::vector<std::string> split_names(std::string_view text) {
    std::vector<std::string> names;
    for (;;) {
        const std::size_t colon = text.find(':');
        names.emplace_back(text.substr(0, colon));
        if (colon == std::string_view::npos) return names;
        text.remove_prefix(colon + 1);
    }
}

std::vector<ListenFd> parse() {
    const char* pid_text = std::getenv("LISTEN_PID");
    if (pid_text == nullptr) return {};
    const std::optional<long> pid = parse_decimal(pid_text, INT_MAX);
    if (!pid || *pid == 0)
        throw std::invalid_argument(std::string(kWhat) + ": LISTEN_PID=\"" + pid_text + "\" is not a process id");
    if (*pid != ::getpid()) return {};  // meant for another process (our parent, say)
    const char* fds_text = std::getenv("LISTEN_FDS");
    if (fds_text == nullptr) return {};
    const std::optional<long> count = parse_decimal(fds_text, INT_MAX - kListenFdsStart);
    if (!count)
        throw std::invalid_argument(std::string(kWhat) + ": LISTEN_FDS=\"" + fds_text +
                                    "\" is not a count of descriptors");
    std::vector<std::string> names(static_cast<std::size_t>(*count), "unknown");
    if (const char* names_text = std::getenv("LISTEN_FDNAMES"); names_text != nullptr && *count > 0) {
        std::vector<std::string> given = split_names(names_text);
        if (given.size() != names.size())
            throw std::invalid_argument(std::string(kWhat) + ": LISTEN_FDNAMES=\"" + names_text + "\" has " +
                                        std::to_string(given.size()) + " names for LISTEN_FDS=" + fds_text);
        names = std::move(given);
    }
    // Every descriptor checked before any is owned: on an error nothing is closed.
    for (int i = 0; i < static_cast<int>(*count); ++i) {
        const int fd = kListenFdsStart + i;
        if (::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0)
            throw std::system_error(errno, std::system_category(),
                                    std::string(kWhat) + ": LISTEN_FDS=" + fds_text + " but descriptor " +
                                        std::to_string(fd) + " is not open");
    }
    std::vector<ListenFd> out;
    out.reserve(names.size());
    for (std::size_t i = 0; i < names.size(); ++i)
        out.push_back({io::FileDescriptor(kListenFdsStart + static_cast<int>(i)), std::move(names[i])});
    return out;
}

}  // namespace

std::vector<ListenFd> listen_fds(bool unset_env) {
    struct Unset {
        bool on;
        ~Unset() {
            if (!on) return;
            ::unsetenv("LISTEN_PID");
            ::unsetenv("LISTEN_FDS");
            ::unsetenv("LISTEN_FDNAMES");
        }
    } unset{unset_env};  // on every path, an error too (as sd_listen_fds does)
    return parse();
}

}  // namespace eddy::net
