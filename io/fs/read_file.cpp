// io/fs/read_file.cpp
#include <eddy/fs/read_file.hpp>

#include <eddy/fs/file.hpp>

namespace eddy::fs {

Task<std::string> read_file(std::string path) {
    File f = co_await File::open(std::move(path), O_RDONLY);
    std::string out;
    std::size_t hint = f.size();
    out.resize(hint > 0 ? hint + 1 : 4096);  // +1: end of file is seen without a resize
    std::size_t got = 0;
    for (;;) {
        if (got == out.size()) out.resize(out.size() * 2);
        const std::size_t n = co_await f.read_at(std::as_writable_bytes(std::span(out)).subspan(got), got);
        if (n == 0) break;
        got += n;
    }
    out.resize(got);
    f.close();
    co_return out;
}

Task<void> write_file(std::string path, std::string_view contents) {
    File f = co_await File::open(std::move(path), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    co_await f.write_all_at(std::as_bytes(std::span(contents)), 0);
    f.close();
}

}  // namespace eddy::fs
