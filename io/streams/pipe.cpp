// io/streams/pipe.cpp
#include <eddy/io/pipe.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace eddy::io {

Pipe pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::system_error(errno, std::system_category(), "eddy::io::pipe");
    return Pipe{FileDescriptor(fds[0]), FileDescriptor(fds[1])};
}

}  // namespace eddy::io
