// io/fs/metadata.cpp: fs::metadata, fs::symlink_metadata and File::metadata, each one statx
// through the reactor (eddy/fs/metadata.hpp).
#include <eddy/fs/file.hpp>
#include <eddy/fs/metadata.hpp>

#include "fs/path_op.hpp"

#include <fcntl.h>
#include <sys/stat.h>

namespace eddy::fs {
namespace {

std::chrono::system_clock::time_point when(const statx_timestamp& t) {
    return std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
        std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec)));
}

Metadata from_statx(const struct statx& s) {
    Metadata m;
    const mode_t type = s.stx_mode & S_IFMT;
    m.type = type == S_IFREG   ? FileType::kFile
             : type == S_IFDIR ? FileType::kDirectory
             : type == S_IFLNK ? FileType::kSymlink
                               : FileType::kOther;
    m.size = s.stx_size;
    m.permissions = s.stx_mode & 07777;
    m.links = s.stx_nlink;
    m.uid = s.stx_uid;
    m.gid = s.stx_gid;
    m.accessed = when(s.stx_atime);
    m.modified = when(s.stx_mtime);
    m.changed = when(s.stx_ctime);
    return m;
}

constexpr unsigned kMask = STATX_TYPE | STATX_MODE | STATX_NLINK | STATX_UID | STATX_GID | STATX_ATIME | STATX_MTIME |
                           STATX_CTIME | STATX_SIZE;

Task<Metadata> stat_path(std::string path, int flags, const char* what) {
    struct statx s {};
    co_await detail::path_op({.kind = detail::IoKind::kStatx,
                              .fd = AT_FDCWD,
                              .addr = path.data(),
                              .len = kMask,
                              .offset = reinterpret_cast<std::uintptr_t>(&s),
                              .flags = static_cast<std::uint32_t>(flags)},
                             what, path);
    co_return from_statx(s);
}

}  // namespace

Task<Metadata> metadata(std::string path) { return stat_path(std::move(path), 0, "eddy::fs::metadata"); }

Task<Metadata> symlink_metadata(std::string path) {
    return stat_path(std::move(path), AT_SYMLINK_NOFOLLOW, "eddy::fs::symlink_metadata");
}

Task<Metadata> File::metadata() const {
    struct statx s {};
    static char empty[] = "";
    co_await detail::IoAwaiter({.kind = detail::IoKind::kStatx,
                                .fd = fd_.get(),
                                .addr = empty,
                                .len = kMask,
                                .offset = reinterpret_cast<std::uintptr_t>(&s),
                                .flags = AT_EMPTY_PATH},
                               "eddy::fs::File::metadata");
    co_return from_statx(s);
}

}  // namespace eddy::fs
