// io/streams/file_descriptor.cpp
#include <eddy/io/file_descriptor.hpp>

#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace eddy::io {

void FileDescriptor::close() {
    if (fd_ < 0) return;
    const int fd = release();
    // No retry on EINTR: Linux has released the descriptor already, and it may be reused.
    if (::close(fd) != 0 && errno != EINTR) throw std::system_error(errno, std::system_category(), "eddy: close");
}

void FileDescriptor::reset() noexcept {
    if (fd_ >= 0) ::close(release());
}

}  // namespace eddy::io
