// io/fs/dir.cpp: directories (eddy/fs/dir.hpp).
#include <eddy/fs/dir.hpp>

#include "fs/path_op.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <memory>

#include <eddy/runtime/spawn_blocking.hpp>

namespace eddy::fs {
namespace {

FileType type_of(const std::string& path, unsigned char d_type) {
    switch (d_type) {
    case DT_REG:
        return FileType::kFile;
    case DT_DIR:
        return FileType::kDirectory;
    case DT_LNK:
        return FileType::kSymlink;
    case DT_UNKNOWN: {  // some file systems do not say: ask
        struct stat st {};
        if (::lstat(path.c_str(), &st) != 0) return FileType::kOther;
        return S_ISREG(st.st_mode)   ? FileType::kFile
               : S_ISDIR(st.st_mode) ? FileType::kDirectory
               : S_ISLNK(st.st_mode) ? FileType::kSymlink
                                     : FileType::kOther;
    }
    default:
        return FileType::kOther;
    }
}

std::vector<DirEntry> list(const std::string& path) {
    struct CloseDir {
        void operator()(DIR* d) const noexcept { ::closedir(d); }
    };
    std::unique_ptr<DIR, CloseDir> dir(::opendir(path.c_str()));
    if (!dir) detail::throw_path_errno("eddy::fs::read_dir", path);
    std::vector<DirEntry> out;
    const std::string prefix = path + "/";  // one concatenation per entry, not two
    for (;;) {
        errno = 0;
        const dirent* e = ::readdir(dir.get());
        if (e == nullptr) {
            if (errno != 0) detail::throw_path_errno("eddy::fs::read_dir", path);
            return out;
        }
        const std::string name = e->d_name;
        if (name == "." || name == "..") continue;
        out.push_back(DirEntry{name, type_of(prefix + name, e->d_type)});
    }
}

void remove_tree(const std::string& path) {
    std::error_code ec;
    const auto st = std::filesystem::symlink_status(path, ec);
    if (ec) detail::throw_path_error(ec, "eddy::fs::remove_dir_all", path);
    if (st.type() != std::filesystem::file_type::directory)
        detail::throw_path_error(std::make_error_code(std::errc::not_a_directory), "eddy::fs::remove_dir_all", path);
    std::filesystem::remove_all(path, ec);
    if (ec) detail::throw_path_error(ec, "eddy::fs::remove_dir_all", path);
}

}  // namespace

Task<void> create_dir(std::string path, mode_t mode) {
    co_await detail::path_op({.kind = detail::IoKind::kMkdirAt, .fd = AT_FDCWD, .addr = path.data(), .len = mode},
                             "eddy::fs::create_dir", path);
}

Task<void> create_dir_all(std::string path, mode_t mode) {
    // Each prefix in turn: "a", "a/b", "a/b/c"; one that exists must be a directory.
    for (std::size_t at = 1; at <= path.size(); ++at) {
        if (at != path.size() && path[at] != '/') continue;
        std::string prefix = path.substr(0, at);
        bool exists = false;
        try {
            co_await create_dir(prefix, mode);
        } catch (const std::system_error& e) {
            if (e.code() != std::errc::file_exists) throw;
            exists = true;
        }
        if (exists && !(co_await metadata(prefix)).is_dir())
            detail::throw_path_error(std::make_error_code(std::errc::not_a_directory), "eddy::fs::create_dir_all",
                                     prefix);
    }
}

Task<void> remove_dir(std::string path) {
    co_await detail::path_op(
        {.kind = detail::IoKind::kUnlinkAt, .fd = AT_FDCWD, .addr = path.data(), .flags = AT_REMOVEDIR},
        "eddy::fs::remove_dir", path);
}

Task<void> remove_dir_all(std::string path) {
    // The handle first, then the co_await: g++ 12 destroys a lambda with an init-capture
    // twice when the lambda is a temporary inside a co_await expression.
    auto call = eddy::spawn_blocking([path = std::move(path)] { remove_tree(path); });
    co_await std::move(call);
}

Task<std::vector<DirEntry>> read_dir(std::string path) {
    auto call = eddy::spawn_blocking([path = std::move(path)] { return list(path); });
    co_return co_await std::move(call);
}

}  // namespace eddy::fs
