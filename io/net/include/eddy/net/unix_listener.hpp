//! eddy/net/unix_listener.hpp: net::UnixListener, a Unix domain socket that accepts
//! connections on a path or an abstract name.
//!
//!     auto listener = eddy::net::UnixListener::bind(eddy::net::UnixAddr::path("/run/app.sock"),
//!                                                   {.remove_stale = true});
//!     for (;;) spawn(serve(co_await listener.accept()));
//!
//! # A path that is already there
//! bind(2) on an existing path fails with EADDRINUSE whatever is there, which after a crash is
//! usually a socket file nobody listens on any more. bind() tells the cases apart and says
//! which it is, still as std::system_error with EADDRINUSE:
//!   - "a stale socket nobody listens on": a socket file whose connect is refused. With
//!     {.remove_stale = true} it is removed and the bind goes ahead;
//!   - "a live listener is bound there": never removed (telling it apart costs that listener
//!     one connection, which closes at once: it reads end of stream);
//!   - "exists and is not a socket": never removed.
//! The listener does not remove its path when it closes (the file may be shared across
//! processes; a restart uses remove_stale). Abstract names need none of this.
//! @file
#pragma once

#include <stop_token>
#include <utility>

#include <eddy/net/detail/socket_io.hpp>
#include <eddy/io/file_descriptor.hpp>
#include <eddy/net/unix_addr.hpp>
#include <eddy/net/unix_stream.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::net {

/// A Unix domain socket that accepts connections (see the file comment). Move-only;
/// closes on destruction.
class UnixListener {
public:
    /// How bind() sets the listener up.
    struct Options {
        int backlog = 1024;  ///< listen(2)'s queue of connections not yet accepted
        /// Replace a socket file at the path that nobody listens on (see above).
        bool remove_stale = false;
    };

    /// std::system_error on failure (EADDRINUSE with what is at the path, EACCES, ENOENT for
    /// a missing directory, ...).
    static UnixListener bind(const UnixAddr& addr, Options options);
    static UnixListener bind(const UnixAddr& addr) { return bind(addr, Options{}); }  ///< bind(addr, Options{})
    /// Adopts a listening Unix stream socket made elsewhere (systemd's, net::listen_fds()):
    /// takes ownership of `fd`, checks it (std::system_error EBADF, ENOTSOCK, or EINVAL
    /// naming what it is instead; `fd` is closed then) and makes it close-on-exec and
    /// non-blocking.
    static UnixListener from_fd(io::FileDescriptor fd);

    /// The next connection.
    Task<UnixStream> accept(std::stop_token token = {});
    /// The next connection and its peer's address (usually unnamed).
    Task<std::pair<UnixStream, UnixAddr>> accept_with_address(std::stop_token token = {});

    UnixAddr local_address() const;  ///< the address it listens on
    /// Stops listening now; an accept pending in another task fails (EINVAL).
    void close();
    int native_handle() const noexcept {
        return io_.fd();
    }  ///< the listening socket's descriptor, still owned by this object

private:
    explicit UnixListener(io::FileDescriptor fd) noexcept : io_(std::move(fd)) {}
    eddy::detail::SocketIo io_;
};

}  // namespace eddy::net
