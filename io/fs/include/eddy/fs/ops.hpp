//! eddy/fs/ops.hpp: removing, renaming and copying files.
//!
//!     co_await eddy::fs::rename("data.tmp", "data");      // atomic within a file system
//!     co_await eddy::fs::copy("config", "config.bak");    // gives the bytes copied
//!     co_await eddy::fs::remove_file("data.old");
//!
//! remove_file and rename are one IORING_OP_UNLINKAT / RENAMEAT each. copy runs on the
//! blocking pool: copy_file_range(2) (the kernel copies, or clones on a file system that can),
//! read/write where it cannot; the copy gets the source's permissions. Errors are
//! std::system_error with the errno and the paths: ENOENT, EISDIR (remove_file or copy of a
//! directory), EXDEV (rename across file systems), EACCES.
//! @file
#pragma once

#include <cstdint>
#include <string>

#include <eddy/tasks/task.hpp>

namespace eddy::fs {

/// Removes a file or a symbolic link (IORING_OP_UNLINKAT); EISDIR for a directory.
Task<void> remove_file(std::string path);
/// Renames `from` to `to` (IORING_OP_RENAMEAT), replacing `to` atomically if it exists;
/// EXDEV across file systems.
Task<void> rename(std::string from, std::string to);
/// Copies the file `from` to `to` (replaced if it exists) with the source's permissions, on
/// the blocking pool; gives the bytes copied.
Task<std::uint64_t> copy(std::string from, std::string to);

}  // namespace eddy::fs
