//! eddy/io/stream_errors.hpp: the errors of the code that frames a byte stream
//! (io::BufReader, io::FrameReader, io::FrameWriter, the codecs of eddy/io/codec.hpp).
//! Errors of the stream itself stay what the stream throws: std::system_error carrying the
//! errno.
//!
//!   UnexpectedEof   the stream ended inside something that must be whole (read_exact, a
//!                   frame cut short). A std::system_error with ENODATA, the code
//!                   TcpStream::read_exact uses, so one catch covers both.
//!   LineTooLong     a line (read_until, read_line, lines) grew past the reader's max_line:
//!                   the bytes read for it are dropped (see BufReader); a std::length_error.
//!   FrameTooLong    a frame's announced length (FrameReader) or a payload (FrameWriter) is
//!                   above max_frame; a std::length_error. Nothing of the frame was consumed
//!                   beyond its header, nothing was written.
//! @file
#pragma once

#include <cerrno>
#include <stdexcept>
#include <string>
#include <system_error>

namespace eddy::io {

/// The stream ended inside something that must be whole: a std::system_error with ENODATA
/// (see the file comment).
class UnexpectedEof : public std::system_error {
public:
    /// `what` says what was cut short.
    explicit UnexpectedEof(const std::string& what) : std::system_error(ENODATA, std::generic_category(), what) {}
};

/// A line grew past the BufReader's max_line; the bytes read for it are dropped.
class LineTooLong : public std::length_error {
public:
    using std::length_error::length_error;
};

/// A frame's announced length (FrameReader) or a payload (FrameWriter) is above max_frame.
class FrameTooLong : public std::length_error {
public:
    using std::length_error::length_error;
};

}  // namespace eddy::io
