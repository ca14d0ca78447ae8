// io/fs/open_cached.cpp: io/fs/open_cached.hpp.
#include "fs/open_cached.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace eddy::detail {

int open_cached(const char* path, int flags, int dir, std::uint64_t resolve) noexcept {
    if ((flags & (O_ACCMODE | O_CREAT | O_TRUNC | O_TMPFILE)) != O_RDONLY) return -1;
    open_how how{};
    how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC | O_NONBLOCK);
    how.resolve = RESOLVE_CACHED | resolve;
    const auto fd = static_cast<int>(::syscall(SYS_openat2, dir, path, &how, sizeof how));
    if (fd < 0) return errno == EAGAIN || errno == ENOSYS || errno == EINVAL ? -1 : kOpenFailed;
    struct stat st {};
    const bool plain = ::fstat(fd, &st) == 0 && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode));
    if (plain && ((flags & O_NONBLOCK) != 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0)) return fd;
    ::close(fd);
    return -1;
}

}  // namespace eddy::detail
