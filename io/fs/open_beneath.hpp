// io/fs/open_beneath.hpp: an open that cannot leave its directory (fs::File::open_beneath,
// fs::OpenOptions::open_beneath).
//
// openat2(2) with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS: the kernel resolves every
// component, symbolic links included, and fails with EXDEV as soon as one would step above
// the directory, so no check of the text of the path can be raced by a rename or a new link.
// First on the worker with RESOLVE_CACHED (fs/open_cached.hpp), then IORING_OP_OPENAT2 (the
// readiness driver: its file pool calls openat2). Linux 5.6 and later; an older kernel
// answers ENOSYS.
#pragma once

#include "private.hpp"

#include <sys/types.h>

#include <string>

#include <eddy/fs/file.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::detail {

/// Opens `path` beneath the directory descriptor `dir` with open(2) `flags` and `mode`;
/// errors name `what` and the path.
Task<fs::File> open_beneath(int dir, std::string path, int flags, mode_t mode, const char* what);

}  // namespace eddy::detail
