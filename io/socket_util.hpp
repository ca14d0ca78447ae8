// io/socket_util.hpp: the synchronous socket calls the socket types share.
#pragma once

#include "runtime/private.hpp"

#include <eddy/io/file_descriptor.hpp>
#include <eddy/net/socket_addr.hpp>

namespace eddy::detail {

/// Throws std::system_error with the current errno and `what`.
[[noreturn]] void throw_errno(const char* what);
/// A new close-on-exec socket of `family` and `type` (std::system_error, e.g. EMFILE).
io::FileDescriptor new_socket(int family, int type, const char* what);
/// getsockname / getpeername as a SocketAddr (std::system_error, e.g. ENOTCONN).
net::SocketAddr local_address_of(int fd, const char* what);
net::SocketAddr peer_address_of(int fd, const char* what);
/// Closes a socket so that reads and accepts pending on it end: shutdown(SHUT_RD) first (a
/// pending read then returns 0, a pending accept fails with EINVAL), since an operation in
/// flight keeps the socket open in the kernel past close(2). std::system_error from close.
void close_socket(io::FileDescriptor& fd);
/// setsockopt of an int option (std::system_error).
void set_int_option(int fd, int level, int name, int value, const char* what);

} // namespace eddy::detail
