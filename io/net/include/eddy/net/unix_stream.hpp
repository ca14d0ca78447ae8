//! eddy/net/unix_stream.hpp: net::UnixStream, a connected Unix domain stream socket: a
//! sidecar, a local daemon, the other end of a socketpair.
//!
//!     auto s = co_await eddy::net::UnixStream::connect(eddy::net::UnixAddr::path("/run/app.sock"));
//!     co_await s.write_all(request);
//!     std::size_t n = co_await s.read(buf);          // 0: the peer closed its side
//!     eddy::net::Credentials who = s.peer_credentials();
//!
//! The same readiness path, errors and cancellation as net::TcpStream (eddy/net/tcp_stream.hpp):
//! connect to a path nobody listens on is std::system_error with ECONNREFUSED, to a path that
//! does not exist ENOENT. A UnixStream is an io::AsyncStream.
//!
//! One reader and one writer at once, as for a TcpStream: one task may read while another
//! writes, on any workers. Two reads (or two writes) at once lose nothing, but which bytes
//! each read gets (where each write's bytes land) is unspecified: keep to one of each, or take
//! turns (see eddy/net/tcp_stream.hpp).
//! @file
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <span>
#include <stop_token>
#include <utility>

#include <eddy/net/detail/socket_stream.hpp>
#include <eddy/io/file_descriptor.hpp>
#include <eddy/io/stream.hpp>
#include <eddy/net/unix_addr.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::detail {
struct UnixStreamNames {
    static constexpr const char* kRead = "eddy::net::UnixStream::read";
    static constexpr const char* kWrite = "eddy::net::UnixStream::write";
    static constexpr const char* kWriteAll = "eddy::net::UnixStream::write_all";
    static constexpr const char* kReadVectored = "eddy::net::UnixStream::read_vectored";
    static constexpr const char* kWriteVectored = "eddy::net::UnixStream::write_vectored";
    static constexpr const char* kSendFile = "eddy::net::UnixStream::send_file";
    static constexpr const char* kReadable = "eddy::net::UnixStream::readable";
};
}  // namespace eddy::detail

namespace eddy::net {

/// Who is at the other end (SO_PEERCRED): the process and user that connected (or created
/// the pair).
struct Credentials {
    pid_t pid;  ///< the peer's process id (as it was when it connected)
    uid_t uid;  ///< its effective user id
    gid_t gid;  ///< its effective group id
};

/// A connected Unix domain stream socket (see the file comment). Move-only; closes on
/// destruction. read, write, write_all, read_vectored, write_vectored, readable and send_file come from its base
/// (an io::AsyncStream), as for TcpStream.
class UnixStream : public eddy::detail::SocketStream<eddy::detail::UnixStreamNames> {
public:
    /// Connects to `addr` (std::system_error: ENOENT or ECONNREFUSED when nobody listens there).
    static Task<UnixStream> connect(const UnixAddr& addr, std::stop_token token = {});
    /// Two connected streams (socketpair(2)).
    static std::pair<UnixStream, UnixStream> pair();

    /// Adopts a connected Unix stream socket.
    explicit UnixStream(io::FileDescriptor fd) noexcept : SocketStream(std::move(fd)) {}

    // read, write, write_all, read_vectored, write_vectored, readable, send_file: see eddy/net/detail/socket_stream.hpp

    /// Which direction shutdown() ends.
    enum class Shutdown { kRead = 0, kWrite = 1, kBoth = 2 };
    /// Shuts down one or both directions (shutdown(2)): after kWrite the peer reads 0.
    void shutdown(Shutdown how = Shutdown::kWrite);
    /// Closes now (see TcpStream::close). std::system_error on failure.
    void close();

    /// Who is at the other end (SO_PEERCRED).
    Credentials peer_credentials() const;
    UnixAddr local_address() const;  ///< the address this end is bound to (usually unnamed for a client)
    UnixAddr peer_address() const;   ///< the peer's address (unnamed when the peer never bound one)
};

static_assert(io::AsyncStream<UnixStream>);

}  // namespace eddy::net
