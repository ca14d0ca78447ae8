//! eddy/io/file_descriptor.hpp: io::FileDescriptor, an owned file descriptor.
//!
//! Closes on destruction (errors ignored, as there is no one to tell); close() closes now and
//! reports an error as std::system_error. Move-only. Every socket and file type of eddy
//! holds one.
//! @file
#pragma once

namespace eddy::io {

/// An owned file descriptor, closed on destruction. Move-only.
class FileDescriptor {
public:
    FileDescriptor() noexcept = default;
    /// Takes ownership of `fd` (-1: empty).
    explicit FileDescriptor(int fd) noexcept : fd_(fd) {}
    /// Takes `other`'s descriptor; `other` is left empty.
    FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.release()) {}
    /// Closes this descriptor, then takes `other`'s.
    FileDescriptor& operator=(FileDescriptor&& other) noexcept {
        if (this != &other) {
            reset();
            fd_ = other.release();
        }
        return *this;
    }
    FileDescriptor(const FileDescriptor&) = delete;
    FileDescriptor& operator=(const FileDescriptor&) = delete;
    ~FileDescriptor() { reset(); }

    /// The descriptor, or -1 when empty.
    int get() const noexcept { return fd_; }
    explicit operator bool() const noexcept { return fd_ >= 0; }  ///< not empty
    /// Gives up ownership and returns the descriptor.
    int release() noexcept {
        const int fd = fd_;
        fd_ = -1;
        return fd;
    }
    /// Closes the descriptor now. Throws std::system_error (the errno of close(2), e.g. EIO
    /// or EBADF) on failure; the object is empty afterwards either way. No-op when empty.
    void close();

private:
    void reset() noexcept;
    int fd_ = -1;
};

}  // namespace eddy::io
