//! eddy/fs/dir.hpp: directories.
//!
//!     co_await eddy::fs::create_dir_all("/var/lib/app/cache");
//!     for (const auto& e : co_await eddy::fs::read_dir("/var/lib/app")) ...   // e.name, e.type
//!     co_await eddy::fs::remove_dir_all("/var/lib/app/cache");
//!
//! create_dir and remove_dir are one IORING_OP_MKDIRAT / UNLINKAT each; create_dir_all makes
//! each missing component that way. read_dir and remove_dir_all walk a directory with
//! readdir(3), so they run on the blocking pool (eddy::spawn_blocking). Errors are
//! std::system_error with the errno and the path: EEXIST (create_dir on something that is
//! there), ENOTDIR (a file where a directory should be), ENOTEMPTY (remove_dir),
//! ENOENT, EACCES.
//! @file
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include <eddy/fs/metadata.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::fs {

/// One entry of read_dir().
struct DirEntry {
    std::string name;  ///< without the directory
    FileType type;     ///< of the entry itself (a symlink is kSymlink)
};

/// Creates the directory `path` (IORING_OP_MKDIRAT) with `mode` minus the umask; EEXIST if
/// something is there.
Task<void> create_dir(std::string path, mode_t mode = 0755);
/// Creates `path` and every missing parent; a directory that is there already is fine.
Task<void> create_dir_all(std::string path, mode_t mode = 0755);
/// Removes an empty directory.
Task<void> remove_dir(std::string path);
/// Removes a directory and everything in it (symlinks are removed, not followed).
Task<void> remove_dir_all(std::string path);
/// The entries of a directory, without "." and "..", in the order the file system gives.
Task<std::vector<DirEntry>> read_dir(std::string path);

}  // namespace eddy::fs
