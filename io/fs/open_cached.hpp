// io/fs/open_cached.hpp: a read-only open done on the worker when the kernel's caches can
// resolve the path (fs::File::open, fs::OpenOptions::open), instead of a trip through the
// reactor.
//
// openat2(2) with RESOLVE_CACHED (Linux 5.12) fails with EAGAIN instead of reading a
// directory from the disk. O_NONBLOCK keeps the open itself from waiting (a FIFO would wait
// for a writer); only a regular file or a directory is kept, and O_NONBLOCK is taken off
// again unless the caller asked for it (an io_uring read of an O_NONBLOCK file fails with
// EAGAIN instead of waiting for the disk). Anything else goes through IORING_OP_OPENAT as
// before: opening to write, create or truncate, a path not in the caches, another kind of
// file, a kernel without openat2 or RESOLVE_CACHED.
#pragma once

#include "private.hpp"

#include <fcntl.h>

#include <cstdint>

namespace eddy::detail {

/// open_cached()'s result when the open failed for good (errno set: ENOENT, EACCES, ...,
/// what io_uring would give just the same).
inline constexpr int kOpenFailed = -2;

/// The descriptor (O_CLOEXEC added), or -1: go through io_uring instead, or kOpenFailed.
/// `path` is taken relative to `dir` (AT_FDCWD: the working directory), with the RESOLVE_*
/// flags of `resolve` added to RESOLVE_CACHED.
int open_cached(const char* path, int flags, int dir = AT_FDCWD, std::uint64_t resolve = 0) noexcept;

}  // namespace eddy::detail
