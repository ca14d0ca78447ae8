//! eddy/net/activation.hpp: net::listen_fds(), the sockets a service manager (systemd) or a
//! previous generation of the server opened and passed on at exec.
//!
//!     std::vector<eddy::net::ListenFd> fds = eddy::net::listen_fds();
//!     auto listener = fds.empty() ? eddy::net::TcpListener::bind(addr)
//!                                 : eddy::net::TcpListener::from_fd(std::move(fds[0].fd));
//!
//! # The protocol (systemd's sd_listen_fds(3))
//! The process that starts the server opens the sockets, places them on consecutive
//! descriptors from 3 on (not close-on-exec) and sets three environment variables before
//! exec: LISTEN_PID, the process id of the server (so that a child the server starts later,
//! inheriting the environment, does not take the sockets for its own), LISTEN_FDS, how many
//! descriptors were passed, and optionally LISTEN_FDNAMES, one name per descriptor separated
//! by colons (systemd's FileDescriptorName=, "unknown" when not set). A server that finds
//! LISTEN_PID naming another process, or no LISTEN_PID, got nothing.
//!
//! listen_fds() reads them, makes each descriptor close-on-exec, and by default removes the
//! three variables (as sd_listen_fds(1) does): a child the server starts then inherits
//! neither the variables nor the descriptors. It does not look at what the descriptors are:
//! TcpListener::from_fd, UnixListener::from_fd and UdpSocket::from_fd check that when they
//! adopt one. Call it once, early, before threads that read the environment (setenv and
//! unsetenv are not thread-safe).
//!
//! Errors: std::invalid_argument for a LISTEN_PID or LISTEN_FDS that is not a number, or a
//! LISTEN_FDNAMES with another count of names than LISTEN_FDS; std::system_error (EBADF) when
//! a descriptor LISTEN_FDS announces is not open. Nothing is adopted then.
//! @file
#pragma once

#include <string>
#include <vector>

#include <eddy/io/file_descriptor.hpp>

namespace eddy::net {

/// The first descriptor the protocol passes (SD_LISTEN_FDS_START).
inline constexpr int kListenFdsStart = 3;

/// One passed descriptor and its name.
struct ListenFd {
    io::FileDescriptor fd;  ///< owned: adopt it with TcpListener::from_fd and the like
    std::string name;       ///< from LISTEN_FDNAMES; "unknown" when it is not set
};

/// The descriptors passed to this process (see the file comment); empty when none were.
/// `unset_env`: remove LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES from the environment.
std::vector<ListenFd> listen_fds(bool unset_env = true);

}  // namespace eddy::net
