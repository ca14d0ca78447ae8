//! eddy/fs/open_options.hpp: fs::OpenOptions, how to open a file, said by name instead of
//! with O_* flags.
//!
//!     auto log = co_await eddy::fs::OpenOptions().append(true).create(true).open("app.log");
//!     auto fresh = co_await eddy::fs::OpenOptions().write(true).create_new(true).open("lock");
//!
//! read/write/append choose the access (append implies write: every write goes to the end);
//! create makes a missing file, create_new insists on making it (EEXIST if it exists),
//! truncate empties it; mode is for a file created (0644, minus the umask). A combination
//! that cannot work (neither read, write nor append; truncate or create without write access)
//! is std::invalid_argument; what the kernel refuses is std::system_error with the errno and
//! the path. open_beneath(dir, path) opens within a directory and never outside it.
//! @file
#pragma once

#include <sys/types.h>

#include <string>

#include <eddy/fs/file.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::fs {

/// How to open a file, by name instead of O_* flags; each setter returns *this for chaining
/// (see the file comment for what combines).
class OpenOptions {
public:
    OpenOptions& read(bool on) noexcept {
        read_ = on;
        return *this;
    }  ///< O_RDONLY, or O_RDWR with write
    OpenOptions& write(bool on) noexcept {
        write_ = on;
        return *this;
    }  ///< O_WRONLY, or O_RDWR with read
    OpenOptions& append(bool on) noexcept {
        append_ = on;
        return *this;
    }  ///< O_APPEND (implies write): every write goes to the end
    OpenOptions& create(bool on) noexcept {
        create_ = on;
        return *this;
    }  ///< O_CREAT: make the file if it is missing
    OpenOptions& create_new(bool on) noexcept {
        create_new_ = on;
        return *this;
    }  ///< O_CREAT | O_EXCL: make the file, EEXIST if it exists
    OpenOptions& truncate(bool on) noexcept {
        truncate_ = on;
        return *this;
    }  ///< O_TRUNC: empty it (needs write access)
    OpenOptions& mode(mode_t m) noexcept {
        mode_ = m;
        return *this;
    }  ///< the permissions of a file created (default 0644, minus the umask)

    /// The open(2) flags these options mean (std::invalid_argument, see above).
    int flags() const;
    /// Opens `path` with these options (IORING_OP_OPENAT): std::invalid_argument for a
    /// combination that cannot work, std::system_error with the errno and the path for what the
    /// kernel refuses.
    Task<File> open(std::string path) const;
    /// Opens `path` beneath the directory `dir` with these options, never outside it (as
    /// File::open_beneath: EXDEV for a path or symbolic link that leaves `dir`).
    Task<File> open_beneath(const File& dir, std::string path) const;

private:
    bool read_ = false, write_ = false, append_ = false, create_ = false, create_new_ = false, truncate_ = false;
    mode_t mode_ = 0644;
};

}  // namespace eddy::fs
