//! eddy/fs/read_file.hpp: whole-file helpers.
//!
//!     std::string text = co_await eddy::fs::read_file("config.txt");
//!     co_await eddy::fs::write_file("out.txt", text);       // created or truncated, mode 0644
//!
//! Errors are std::system_error carrying the errno (ENOENT for a missing file, ...).
//! @file
#pragma once

#include <string>
#include <string_view>

#include <eddy/tasks/task.hpp>

namespace eddy::fs {

/// The whole file (read until end of file, so files that grow or report size 0, such as
/// those in /proc, are read entirely).
Task<std::string> read_file(std::string path);
/// Replaces the file's contents with `contents` (which must outlive the co_await).
Task<void> write_file(std::string path, std::string_view contents);

}  // namespace eddy::fs
