// io/fs/open_options.cpp: fs::OpenOptions (eddy/fs/open_options.hpp).
#include <eddy/fs/open_options.hpp>

#include "fs/open_cached.hpp"
#include "fs/path_op.hpp"

#include <fcntl.h>

#include <stdexcept>

namespace eddy::fs {

int OpenOptions::flags() const {
    const bool writes = write_ || append_;
    if (!read_ && !writes) throw std::invalid_argument("eddy::fs::OpenOptions: neither read, write nor append");
    if ((truncate_ || create_ || create_new_) && !writes)
        throw std::invalid_argument("eddy::fs::OpenOptions: truncate, create and create_new need write or append");
    if (truncate_ && append_) throw std::invalid_argument("eddy::fs::OpenOptions: truncate with append");
    int f = read_ && writes ? O_RDWR : writes ? O_WRONLY : O_RDONLY;
    if (append_) f |= O_APPEND;
    if (create_new_) f |= O_CREAT | O_EXCL;
    else if (create_) f |= O_CREAT;
    if (truncate_) f |= O_TRUNC;
    return f;
}

Task<File> OpenOptions::open(std::string path) const {
    const int f = flags();
    if (const int cached = detail::open_cached(path.c_str(), f); cached >= 0)
        co_return File(io::FileDescriptor(cached));
    else if (cached == detail::kOpenFailed) detail::throw_path_errno("eddy::fs::OpenOptions::open", path);
    const std::size_t fd = co_await detail::path_op({.kind = detail::IoKind::kOpenAt,
                                                     .fd = AT_FDCWD,
                                                     .addr = path.data(),
                                                     .len = mode_,
                                                     .flags = static_cast<std::uint32_t>(f | O_CLOEXEC)},
                                                    "eddy::fs::OpenOptions::open", path);
    co_return File(io::FileDescriptor(static_cast<int>(fd)));
}

}  // namespace eddy::fs
