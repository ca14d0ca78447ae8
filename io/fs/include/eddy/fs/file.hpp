//! eddy/fs/file.hpp: fs::File, a file read and written at explicit offsets.
//!
//!     auto f = co_await eddy::fs::File::open("data.bin");                      // O_RDONLY
//!     auto out = co_await eddy::fs::File::open("out.bin", O_WRONLY | O_CREAT | O_TRUNC, 0644);
//!     std::size_t n = co_await f.read_at(buf, offset);     // 0 at end of file
//!     co_await f.read_exact_at(header, 0);                 // all of it, or io::UnexpectedEof
//!     co_await out.write_at(bytes, 0);  co_await out.fsync();  out.close();
//!     std::size_t m = co_await f.read(buf);                // at the file position (a stream)
//!
//! File::read and File::write use the file position, so a File is an io::AsyncStream (a
//! BufReader reads its lines); fs::OpenOptions opens one for appending.
//! A read first tries preadv2(RWF_NOWAIT) on the worker: what the page cache holds is copied
//! at once, without a trip through the reactor. Everything else (a cache miss, opening,
//! writing, fsync) goes through io_uring and never blocks an eddy worker.
//! Errors are std::system_error carrying the errno (ENOENT, EACCES, EISDIR, ...);
//! read_exact_at's io::UnexpectedEof is one with ENODATA.
//! O_CLOEXEC is always added. The file closes on destruction; close() reports errors.
//! @file
#pragma once

#include <fcntl.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <stop_token>
#include <string>

#include <eddy/io/detail/io_awaiter.hpp>
#include <eddy/fs/metadata.hpp>
#include <eddy/io/file_descriptor.hpp>
#include <eddy/io/stream_errors.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::fs {

/// An open file, read and written at explicit offsets (see the file comment). Move-only;
/// closes on destruction.
class File {
public:
    /// open(2) with `flags` (O_RDONLY, O_WRONLY | O_CREAT | O_TRUNC, ...) and `mode`.
    static Task<File> open(std::string path, int flags = O_RDONLY, mode_t mode = 0644);
    /// Opens `path` beneath the directory `dir` (a File opened with O_DIRECTORY), and never
    /// outside it: openat2(2) with RESOLVE_BENEATH and RESOLVE_NO_MAGICLINKS. A path that
    /// would leave `dir` fails with EXDEV: an absolute path, a ".." above `dir`, or a symbolic
    /// link whose target lies outside it (one that stays inside is followed); a /proc "magic"
    /// link fails with ELOOP. The tool for serving a tree a client names paths in, such as a
    /// file server's root. Errors are std::system_error with the errno and the path.
    static Task<File> open_beneath(const File& dir, std::string path, int flags = O_RDONLY, mode_t mode = 0644);

    /// Adopts an open descriptor.
    explicit File(io::FileDescriptor fd) noexcept : fd_(std::move(fd)) {}

    /// Reads up to buf.size() bytes at `offset`; fewer near the end, 0 at or past it.
    [[nodiscard]] detail::IoAwaiter read_at(std::span<std::byte> buf, std::uint64_t offset,
                                            std::stop_token token = {}) noexcept {
        return detail::IoAwaiter(
            {.kind = detail::IoKind::kRead, .fd = fd_.get(), .addr = buf.data(), .len = buf.size(), .offset = offset},
            "eddy::fs::File::read_at", std::move(token));
    }
    /// Writes up to data.size() bytes at `offset` (at most 1 GiB per call); returns the
    /// count, which can be short (use write_all_at for everything).
    [[nodiscard]] detail::IoAwaiter write_at(std::span<const std::byte> data, std::uint64_t offset,
                                             std::stop_token token = {}) noexcept {
        return detail::IoAwaiter({.kind = detail::IoKind::kWrite,
                                  .fd = fd_.get(),
                                  .addr = const_cast<std::byte*>(data.data()),
                                  .len = data.size(),
                                  .offset = offset},
                                 "eddy::fs::File::write_at", std::move(token));
    }
    /// Reads up to buf.size() bytes at the file position, which advances; 0 at end of file.
    [[nodiscard]] detail::IoAwaiter read(std::span<std::byte> buf, std::stop_token token = {}) noexcept {
        return detail::IoAwaiter(
            {.kind = detail::IoKind::kRead, .fd = fd_.get(), .addr = buf.data(), .len = buf.size()},
            "eddy::fs::File::read", std::move(token));
    }
    /// Writes at the file position (at the end for a file opened to append); may be short.
    [[nodiscard]] detail::IoAwaiter write(std::span<const std::byte> data, std::stop_token token = {}) noexcept {
        return detail::IoAwaiter({.kind = detail::IoKind::kWrite,
                                  .fd = fd_.get(),
                                  .addr = const_cast<std::byte*>(data.data()),
                                  .len = data.size()},
                                 "eddy::fs::File::write", std::move(token));
    }
    /// What the file system says about the open file (statx on the descriptor).
    Task<Metadata> metadata() const;
    /// Truncates or extends the file to `size` bytes (ftruncate(2), on the blocking pool).
    Task<void> set_len(std::uint64_t size);
    /// Writes all of `data` at `offset`.
    Task<void> write_all_at(std::span<const std::byte> data, std::uint64_t offset);
    /// Fills all of `buf` from `offset`, reading again after a short read; io::UnexpectedEof
    /// (a std::system_error with ENODATA) when the file ends first.
    Task<void> read_exact_at(std::span<std::byte> buf, std::uint64_t offset);
    /// Flushes the file's data and metadata to the device.
    Task<void> fsync();
    /// The file's size in bytes (fstat; std::system_error on failure).
    std::uint64_t size() const;
    /// Closes now; std::system_error if close(2) reports an error (EIO: data not written).
    void close() { fd_.close(); }
    int native_handle() const noexcept { return fd_.get(); }  ///< the descriptor, still owned by this object

private:
    io::FileDescriptor fd_;
};

}  // namespace eddy::fs
