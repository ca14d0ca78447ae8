// io/fs/path_op.hpp: one file-system operation on a path through the reactor, its errors
// naming the path(s) (eddy::fs).
#pragma once

#include "private.hpp"

#include <cstddef>
#include <string>
#include <system_error>

#include <eddy/io/detail/io_awaiter.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::detail {

/// std::system_error with `code` and "what(path)" or "what(path, path2)".
[[noreturn]] void throw_path_error(std::error_code code, const char* what, const std::string& path,
                                   const std::string* path2 = nullptr);
/// The errno of the calling thread as throw_path_error.
[[noreturn]] void throw_path_errno(const char* what, const std::string& path, const std::string* path2 = nullptr);

/// Awaits `r`; a failure (not a cancellation) is rethrown naming the path(s).
Task<std::size_t> path_op(IoRequest r, const char* what, const std::string& path, const std::string* path2 = nullptr);

}  // namespace eddy::detail
