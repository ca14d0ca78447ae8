// eddy/fs/file.hpp: fs::File, a file read and written at explicit offsets.
//
//     auto f = co_await eddy::fs::File::open("data.bin");                      // O_RDONLY
//     auto out = co_await eddy::fs::File::open("out.bin", O_WRONLY | O_CREAT | O_TRUNC, 0644);
//     std::size_t n = co_await f.read_at(buf, offset);     // 0 at end of file
//     co_await out.write_at(bytes, 0);  co_await out.fsync();  out.close();
//
// A read first tries preadv2(RWF_NOWAIT) on the worker: what the page cache holds is copied
// at once, without a trip through the reactor. Everything else (a cache miss, opening,
// writing, fsync) goes through io_uring and never blocks an eddy worker.
// Errors are std::system_error carrying the errno (ENOENT, EACCES, EISDIR, ...).
// O_CLOEXEC is always added. The file closes on destruction; close() reports errors.
#pragma once

#include <fcntl.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <stop_token>
#include <string>

#include <eddy/io/detail/io_awaiter.hpp>
#include <eddy/io/file_descriptor.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::fs {

class File {
public:
    /// open(2) with `flags` (O_RDONLY, O_WRONLY | O_CREAT | O_TRUNC, ...) and `mode`.
    static Task<File> open(std::string path, int flags = O_RDONLY, mode_t mode = 0644);

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
    /// Writes all of `data` at `offset`.
    Task<void> write_all_at(std::span<const std::byte> data, std::uint64_t offset);
    /// Flushes the file's data and metadata to the device.
    Task<void> fsync();
    /// The file's size in bytes (fstat; std::system_error on failure).
    std::uint64_t size() const;
    void close() { fd_.close(); }
    int native_handle() const noexcept { return fd_.get(); }

private:
    io::FileDescriptor fd_;
};

} // namespace eddy::fs
