// io/fs/path_op.cpp: io/fs/path_op.hpp.
#include "fs/path_op.hpp"

#include <cerrno>

#include <eddy/tasks/errors.hpp>

namespace eddy::detail {

void throw_path_error(std::error_code code, const char* what, const std::string& path, const std::string* path2) {
    std::string text(what);
    text.append("(").append(path);
    if (path2 != nullptr) text.append(", ").append(*path2);
    text.append(")");
    throw std::system_error(code, text);
}

void throw_path_errno(const char* what, const std::string& path, const std::string* path2) {
    throw_path_error(std::error_code(errno, std::system_category()), what, path, path2);
}

Task<std::size_t> path_op(IoRequest r, const char* what, const std::string& path, const std::string* path2) {
    std::error_code failed;
    try {
        co_return co_await IoAwaiter(r, what);
    } catch (const OperationCancelled&) {
        throw;
    } catch (const std::system_error& e) {
        failed = e.code();
    }
    throw_path_error(failed, what, path, path2);
}

}  // namespace eddy::detail
