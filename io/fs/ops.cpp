// io/fs/ops.cpp: remove_file, rename, copy (eddy/fs/ops.hpp), and File::set_len.
#include <eddy/fs/file.hpp>
#include <eddy/fs/ops.hpp>

#include "fs/path_op.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <eddy/io/file_descriptor.hpp>
#include <eddy/runtime/spawn_blocking.hpp>

namespace eddy::fs {
namespace {

std::uint64_t copy_file(const std::string& from, const std::string& to) {
    constexpr const char* what = "eddy::fs::copy";
    io::FileDescriptor in(::open(from.c_str(), O_RDONLY | O_CLOEXEC));
    if (!in) detail::throw_path_errno(what, from, &to);
    struct stat st {};
    if (::fstat(in.get(), &st) != 0) detail::throw_path_errno(what, from, &to);
    if (S_ISDIR(st.st_mode)) detail::throw_path_error(std::make_error_code(std::errc::is_a_directory), what, from, &to);
    io::FileDescriptor out(::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, st.st_mode & 07777));
    if (!out) detail::throw_path_errno(what, from, &to);
    std::uint64_t total = 0;
    bool kernel_copy = true;
    for (;;) {
        ssize_t n = -1;
        if (kernel_copy) {
            n = ::copy_file_range(in.get(), nullptr, out.get(), nullptr, std::size_t{1} << 30, 0);
            if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
                kernel_copy = false;  // this pair of file systems cannot: copy by hand
                continue;
            }
        } else {
            char buf[65536];
            n = ::read(in.get(), buf, sizeof buf);
            for (ssize_t done = 0; n > 0 && done < n;) {
                const ssize_t w = ::write(out.get(), buf + done, static_cast<std::size_t>(n - done));
                if (w < 0 && errno != EINTR) detail::throw_path_errno(what, from, &to);
                if (w > 0) done += w;
            }
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) detail::throw_path_errno(what, from, &to);
        if (n == 0) break;
        total += static_cast<std::uint64_t>(n);
    }
    if (::fchmod(out.get(), st.st_mode & 07777) != 0) detail::throw_path_errno(what, from, &to);
    out.close();
    return total;
}

}  // namespace

Task<void> remove_file(std::string path) {
    co_await detail::path_op({.kind = detail::IoKind::kUnlinkAt, .fd = AT_FDCWD, .addr = path.data()},
                             "eddy::fs::remove_file", path);
}

Task<void> rename(std::string from, std::string to) {
    co_await detail::path_op({.kind = detail::IoKind::kRenameAt,
                              .fd = AT_FDCWD,
                              .addr = from.data(),
                              .offset = reinterpret_cast<std::uintptr_t>(to.c_str())},
                             "eddy::fs::rename", from, &to);
}

Task<std::uint64_t> copy(std::string from, std::string to) {
    // The handle first, then the co_await (see dir.cpp: g++ 12 and init-captures).
    auto call = eddy::spawn_blocking([from = std::move(from), to = std::move(to)] { return copy_file(from, to); });
    co_return co_await std::move(call);
}

Task<void> File::set_len(std::uint64_t size) {
    const int fd = fd_.get();
    auto call = eddy::spawn_blocking([fd, size] {
        if (::ftruncate(fd, static_cast<off_t>(size)) != 0)
            throw std::system_error(errno, std::system_category(), "eddy::fs::File::set_len");
    });
    co_await std::move(call);
}

}  // namespace eddy::fs
