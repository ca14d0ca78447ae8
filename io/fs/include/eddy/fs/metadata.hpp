//! eddy/fs/metadata.hpp: what the file system says about a path or an open file (statx).
//!
//!     auto m = co_await eddy::fs::metadata("/etc/hosts");
//!     if (m.is_file()) use(m.size, m.modified);
//!
//! metadata() follows symbolic links, symlink_metadata() describes the link itself. Both are
//! one IORING_OP_STATX through the reactor: no worker blocks on a slow disk. Errors are
//! std::system_error with the errno and the path (ENOENT, ENOTDIR, EACCES, ...).
//! @file
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>

#include <eddy/tasks/task.hpp>

namespace eddy::fs {

/// What a path is; kOther covers devices, FIFOs and sockets.
enum class FileType { kFile, kDirectory, kSymlink, kOther };

/// A file's statx(2) fields, as metadata() and symlink_metadata() give them.
struct Metadata {
    FileType type = FileType::kOther;  ///< regular file, directory, symbolic link or other
    std::uint64_t size = 0;            ///< in bytes (a symbolic link's: the length of its target)
    std::uint32_t permissions = 0;     ///< mode & 07777
    std::uint64_t links = 0;           ///< hard links to it
    uid_t uid = 0;                     ///< owner
    gid_t gid = 0;                     ///< group
    /// Last access, last change of the contents, last change of the metadata (st_atime,
    /// st_mtime, st_ctime), to the file system's precision.
    /// @{
    std::chrono::system_clock::time_point accessed, modified, changed;
    /// @}

    bool is_file() const noexcept { return type == FileType::kFile; }      ///< type == kFile
    bool is_dir() const noexcept { return type == FileType::kDirectory; }  ///< type == kDirectory
    bool is_symlink() const noexcept {
        return type == FileType::kSymlink;
    }  ///< type == kSymlink (only from symlink_metadata())
};

/// What the file `path` names says, following symbolic links (statx). std::system_error with
/// the errno and the path: ENOENT, ENOTDIR, EACCES, ELOOP, ...
Task<Metadata> metadata(std::string path);
Task<Metadata> symlink_metadata(std::string path);  ///< metadata() of the link itself, not of its target

}  // namespace eddy::fs
