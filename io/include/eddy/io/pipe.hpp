//! eddy/io/pipe.hpp: io::pipe(), a pipe whose ends close themselves.
//!
//!     auto [rd, wr] = eddy::io::pipe();
//!     co_await eddy::io::write(wr.get(), bytes);
//!     std::size_t n = co_await eddy::io::read(rd.get(), buf);   // 0 once wr is closed
//! @file
#pragma once

#include <eddy/io/file_descriptor.hpp>

namespace eddy::io {

struct Pipe {
    FileDescriptor read_end;
    FileDescriptor write_end;
};

/// A new pipe (close-on-exec). Throws std::system_error (e.g. EMFILE) on failure.
Pipe pipe();

} // namespace eddy::io
