//! eddy/io/pipe.hpp: io::pipe(), a pipe whose ends close themselves.
//!
//!     auto [rd, wr] = eddy::io::pipe();
//!     co_await eddy::io::write(wr.get(), bytes);
//!     std::size_t n = co_await eddy::io::read(rd.get(), buf);   // 0 once wr is closed
//! @file
#pragma once

#include <eddy/io/file_descriptor.hpp>

namespace eddy::io {

/// The two ends of a pipe(2), as io::pipe() gives them.
struct Pipe {
    FileDescriptor read_end;   ///< read from it (io::read, or a DescriptorStream)
    FileDescriptor write_end;  ///< write to it; once every write end is closed the reader gets 0
};

/// A new pipe (close-on-exec). Throws std::system_error (e.g. EMFILE) on failure.
Pipe pipe();

}  // namespace eddy::io
