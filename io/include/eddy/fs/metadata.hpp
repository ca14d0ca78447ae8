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

enum class FileType { kFile, kDirectory, kSymlink, kOther };

struct Metadata {
    FileType type = FileType::kOther;
    std::uint64_t size = 0;
    std::uint32_t permissions = 0;  // mode & 07777
    std::uint64_t links = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    std::chrono::system_clock::time_point accessed, modified, changed;

    bool is_file() const noexcept { return type == FileType::kFile; }
    bool is_dir() const noexcept { return type == FileType::kDirectory; }
    bool is_symlink() const noexcept { return type == FileType::kSymlink; }
};

Task<Metadata> metadata(std::string path);
Task<Metadata> symlink_metadata(std::string path);

} // namespace eddy::fs
