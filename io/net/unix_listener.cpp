// io/net/unix_listener.cpp: net::UnixListener (eddy/net/unix_listener.hpp), and what bind() says
// about a path that is already there.
#include <eddy/net/unix_listener.hpp>

#include "net/socket_util.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>

namespace eddy::net {
namespace {

enum class AtPath { kNothing, kStale, kLive, kNotSocket };

/// What is at `addr`'s path: a blocking connect tells a live listener from a stale file.
AtPath what_is_at(const UnixAddr& addr) {
    struct stat st {};
    if (::lstat(addr.name().c_str(), &st) != 0) return AtPath::kNothing;
    if (!S_ISSOCK(st.st_mode)) return AtPath::kNotSocket;
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return AtPath::kLive;  // cannot tell: never remove
    const int rc = ::connect(fd, addr.native(), addr.native_size());
    const int err = errno;
    ::close(fd);
    // A full backlog (EAGAIN) is a live listener too; only a refusal means nobody listens.
    return rc != 0 && err == ECONNREFUSED ? AtPath::kStale : AtPath::kLive;
}

[[noreturn]] void in_use(const UnixAddr& addr, const char* why) {
    throw std::system_error(EADDRINUSE, std::system_category(),
                            "eddy::net::UnixListener::bind(" + addr.to_string() + "): " + why);
}

}  // namespace

UnixListener UnixListener::bind(const UnixAddr& addr, Options options) {
    if (addr.is_unnamed()) {
        throw std::system_error(EINVAL, std::system_category(),
                                "eddy::net::UnixListener::bind: an unnamed address (use UnixAddr::path or ::abstract)");
    }
    // Non-blocking: accept4 runs on the workers and must never block one.
    io::FileDescriptor fd =
        eddy::detail::new_socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, "eddy::net::UnixListener::bind");
    if (::bind(fd.get(), addr.native(), addr.native_size()) != 0) {
        if (errno != EADDRINUSE || !addr.is_path()) eddy::detail::throw_errno("eddy::net::UnixListener::bind");
        switch (what_is_at(addr)) {
        case AtPath::kNotSocket:
            in_use(addr, "the path exists and is not a socket");
        case AtPath::kLive:
            in_use(addr, "a live listener is bound there");
        case AtPath::kStale:
            if (!options.remove_stale)
                in_use(addr, "a stale socket nobody listens on (remove it, or bind with {.remove_stale = true})");
            if (::unlink(addr.name().c_str()) != 0 && errno != ENOENT)
                eddy::detail::throw_errno("eddy::net::UnixListener::bind: removing the stale socket");
            break;
        case AtPath::kNothing:
            break;  // gone meanwhile
        }
        if (::bind(fd.get(), addr.native(), addr.native_size()) != 0)
            eddy::detail::throw_errno("eddy::net::UnixListener::bind");
    }
    if (::listen(fd.get(), options.backlog) != 0) eddy::detail::throw_errno("eddy::net::UnixListener::bind: listen");
    return UnixListener(std::move(fd));
}

Task<UnixStream> UnixListener::accept(std::stop_token token) {
    const std::size_t fd = co_await eddy::detail::SocketAwaiter(io_, eddy::detail::SocketAwaiter::Op::kAccept, nullptr,
                                                                0, "eddy::net::UnixListener::accept", std::move(token));
    co_return UnixStream(io::FileDescriptor(static_cast<int>(fd)));
}

Task<std::pair<UnixStream, UnixAddr>> UnixListener::accept_with_address(std::stop_token token) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    const std::size_t fd =
        co_await eddy::detail::SocketAwaiter(io_, eddy::detail::SocketAwaiter::Op::kAccept, &ss, 0,
                                             "eddy::net::UnixListener::accept", std::move(token), &len);
    UnixStream s{io::FileDescriptor(static_cast<int>(fd))};
    co_return std::pair{std::move(s), UnixAddr::from_native(reinterpret_cast<sockaddr*>(&ss), len)};
}

UnixListener UnixListener::from_fd(io::FileDescriptor fd) {
    return UnixListener(eddy::detail::adopt_socket(std::move(fd), eddy::detail::kUnixListenerSocket, true,
                                                   "eddy::net::UnixListener::from_fd"));
}

void UnixListener::close() { io_.close(); }

UnixAddr UnixListener::local_address() const {
    return eddy::detail::socket_name<UnixAddr>(io_.fd(), false, "eddy::net::UnixListener::local_address");
}

}  // namespace eddy::net
