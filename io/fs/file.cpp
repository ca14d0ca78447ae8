// io/fs/file.cpp
#include <eddy/fs/file.hpp>

#include "fs/open_cached.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <string>

namespace eddy::fs {

Task<File> File::open(std::string path, int flags, mode_t mode) {
    // Opening to read what the caches hold costs a few system calls here rather than a trip
    // through the reactor (fs/open_cached.hpp).
    if (const int fd = detail::open_cached(path.c_str(), flags); fd >= 0) co_return File(io::FileDescriptor(fd));
    else if (fd == detail::kOpenFailed) detail::throw_io_error(-errno, "eddy::fs::File::open");
    const std::size_t fd = co_await detail::IoAwaiter({.kind = detail::IoKind::kOpenAt,
                                                       .fd = AT_FDCWD,
                                                       .addr = path.data(),
                                                       .len = mode,
                                                       .flags = static_cast<std::uint32_t>(flags | O_CLOEXEC)},
                                                      "eddy::fs::File::open");
    co_return File(io::FileDescriptor(static_cast<int>(fd)));
}

Task<void> File::write_all_at(std::span<const std::byte> data, std::uint64_t offset) {
    while (!data.empty()) {
        const std::size_t n = co_await write_at(data, offset);
        data = data.subspan(n);
        offset += n;
    }
}

Task<void> File::read_exact_at(std::span<std::byte> buf, std::uint64_t offset) {
    for (std::size_t got = 0; got < buf.size();) {
        const std::size_t n = co_await read_at(buf.subspan(got), offset + got);
        if (n == 0)
            throw io::UnexpectedEof("eddy::fs::File::read_exact_at: the file ended after " + std::to_string(got) +
                                    " of " + std::to_string(buf.size()) + " bytes");
        got += n;
    }
}

Task<void> File::fsync() {
    co_await detail::IoAwaiter({.kind = detail::IoKind::kFsync, .fd = fd_.get()}, "eddy::fs::File::fsync");
}

std::uint64_t File::size() const {
    struct stat st {};
    if (::fstat(fd_.get(), &st) != 0) detail::throw_errno("eddy::fs::File::size");
    return static_cast<std::uint64_t>(st.st_size);
}

}  // namespace eddy::fs
