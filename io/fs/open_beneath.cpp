// io/fs/open_beneath.cpp: io/fs/open_beneath.hpp.
#include "fs/open_beneath.hpp"

#include "fs/open_cached.hpp"
#include "fs/path_op.hpp"

#include <fcntl.h>
#include <linux/openat2.h>

#include <cstdint>
#include <utility>

#include <eddy/fs/open_options.hpp>

namespace eddy::detail {

namespace {

constexpr std::uint64_t kBeneath = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;

}  // namespace

Task<fs::File> open_beneath(int dir, std::string path, int flags, mode_t mode, const char* what) {
    if (const int fd = open_cached(path.c_str(), flags, dir, kBeneath); fd >= 0)
        co_return fs::File(io::FileDescriptor(fd));
    else if (fd == kOpenFailed) throw_path_errno(what, path);
    // In the frame, which outlives the operation: the kernel reads it at submission.
    open_how how{};
    how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC);
    // openat2 refuses a mode without O_CREAT or O_TMPFILE (EINVAL), where open(2) ignores it.
    if ((flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE) how.mode = mode;
    how.resolve = kBeneath;
    const auto how_at = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(&how));
    const std::size_t fd =
        co_await path_op({.kind = IoKind::kOpenAt2, .fd = dir, .addr = path.data(), .offset = how_at}, what, path);
    co_return fs::File(io::FileDescriptor(static_cast<int>(fd)));
}

}  // namespace eddy::detail

namespace eddy::fs {

Task<File> File::open_beneath(const File& dir, std::string path, int flags, mode_t mode) {
    return detail::open_beneath(dir.native_handle(), std::move(path), flags, mode, "eddy::fs::File::open_beneath");
}

Task<File> OpenOptions::open_beneath(const File& dir, std::string path) const {
    // A coroutine, as open() is: a bad combination is thrown where the task is awaited.
    co_return co_await detail::open_beneath(dir.native_handle(), std::move(path), flags(), mode_,
                                            "eddy::fs::OpenOptions::open_beneath");
}

}  // namespace eddy::fs
