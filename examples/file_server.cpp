// examples/file_server.cpp: a static-file HTTP/1.1 server: GET and HEAD of the files under
// a root directory, with keep-alive and Content-Length.
//
//     file_server --root DIR [--host ADDR] [--port N] [--workers N] [--drain-timeout MS]
//     wrk -t1 -c64 -d5s http://127.0.0.1:7878/index.html
//
// One task per connection reads requests through an io::BufReader (the parsing and its
// limits: examples/support/http_request.hpp) and answers each one:
//   * the target's path (up to a '?') is percent-decoded and taken apart at '/'; empty and
//     "." segments are skipped. A ".." segment, a NUL byte or a bad escape is refused (403
//     or 400) before anything is opened;
//   * the file is opened beneath the root (fs::File::open_beneath: openat2 with
//     RESOLVE_BENEATH), so that no request reaches outside it, not even through a symbolic
//     link: a link that stays inside the root is followed, one whose target lies outside it
//     (a file, or a directory on the way) is refused with 403, as the kernel resolves it;
//   * a regular file answers 200 with its length; a missing file or a directory 404, a file
//     the server may not read 403; other methods 405;
//   * the body: a file of at most 16 KiB is read into the answer's buffer after the headers
//     and goes out in one write; a larger one goes with TcpStream::send_file, which has the
//     kernel copy it from the page cache into the socket with no buffer in between. The
//     file is opened through io_uring when its directory is not in the caches, so a cold
//     directory never blocks a worker;
//   * a client that goes away mid-transfer ends its connection only (EPIPE/ECONNRESET).
// The command line, the accept loop and the drain on SIGTERM are the other server examples'
// (examples/support/tcp_server.hpp). First line:
//     file_server runtime=eddy workers=2 listening=127.0.0.1:7878
#include "support/http_request.hpp"
#include "support/tcp_server.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace {

constexpr std::size_t kInlineBody = 16 * 1024;  // bodies up to this size go out with the headers

using examples::http::Outcome;
using examples::http::Request;

std::string g_root;                        // --root, set once before the server starts
std::optional<eddy::fs::File> g_root_dir;  // the root, open: every file is opened beneath it

/// The path under the root that `target` names ("docs/a.txt"), or the status to refuse it with.
struct Resolved {
    std::string path;
    std::string_view refusal;  // empty: `path` is good
};

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

Resolved resolve(std::string_view target) {
    if (const std::size_t q = target.find('?'); q != std::string_view::npos) target = target.substr(0, q);
    if (target.empty() || target.front() != '/') return {{}, "400 Bad Request"};
    std::string decoded;
    for (std::size_t i = 0; i < target.size(); ++i) {
        if (target[i] != '%') {
            decoded += target[i];
            continue;
        }
        const int hi = i + 2 < target.size() ? hex_digit(target[i + 1]) : -1;
        const int lo = hi < 0 ? -1 : hex_digit(target[i + 2]);
        if (lo < 0) return {{}, "400 Bad Request"};
        decoded += static_cast<char>(hi * 16 + lo);
        i += 2;
    }
    Resolved r;
    std::string_view rest = decoded;
    while (!rest.empty()) {
        const std::size_t slash = rest.find('/');
        const std::string_view segment = rest.substr(0, slash);
        rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
        if (segment.empty() || segment == ".") continue;
        if (segment == ".." || segment.find('\0') != std::string_view::npos) return {{}, "403 Forbidden"};
        if (!r.path.empty()) r.path += '/';
        r.path.append(segment);
    }
    if (r.path.empty()) return {{}, "404 Not Found"};  // the root itself: no listing
    return r;
}

/// Headers of an answer into `text` (the body follows them, or is sent after them).
void format_head(std::string& text, std::string_view status, std::size_t length, bool close) {
    text.assign("HTTP/1.1 ").append(status).append("\r\nServer: eddy\r\nContent-Length: ");
    text.append(std::to_string(length));
    text.append(close ? "\r\nConnection: close\r\n\r\n" : "\r\n\r\n");
}

/// An answer with a short text body (errors).
void format_text(std::string& text, std::string_view status, bool head, bool close) {
    format_head(text, status, status.size(), close);
    if (!head) text.append(status);
}

/// The file a request names, open, with its size; or the status to answer instead.
struct Opened {
    std::optional<eddy::fs::File> file;
    std::size_t size = 0;
    std::string_view refusal;
};

eddy::Task<Opened> open_file(const std::string& relative) {
    Opened o;
    try {
        o.file.emplace(co_await eddy::fs::File::open_beneath(*g_root_dir, relative));
    } catch (const std::system_error& e) {
        // EXDEV: the path leaves the root (a symbolic link to a file or a directory outside);
        // ELOOP: a link loop, or a /proc "magic" link.
        const int err = e.code().value();
        o.refusal = err == EACCES || err == EPERM || err == EXDEV || err == ELOOP ? "403 Forbidden" : "404 Not Found";
        co_return o;
    }
    struct stat st {};
    // fstat on an open descriptor reads the inode the open already brought in: it does not block.
    if (::fstat(o.file->native_handle(), &st) != 0 || !S_ISREG(st.st_mode)) {
        o.file.reset();
        o.refusal = "404 Not Found";
        co_return o;
    }
    o.size = static_cast<std::size_t>(st.st_size);
    co_return o;
}

/// Answers one well-formed request: headers (and a small body) into `out`, a large body
/// straight from the file.
eddy::Task<void> answer(eddy::net::TcpStream& s, eddy::io::BufWriter<eddy::net::TcpStream>& out, const Request& r,
                        std::string& text, std::vector<std::byte>& body) {
    const bool head = r.method == "HEAD";
    if (r.method != "GET" && !head) {
        format_text(text, "405 Method Not Allowed", false, r.close);
        co_await out.write_all(text);
        co_return;
    }
    const Resolved where = resolve(r.target);
    if (!where.refusal.empty()) {
        format_text(text, where.refusal, head, r.close);
        co_await out.write_all(text);
        co_return;
    }
    Opened o = co_await open_file(where.path);
    if (!o.file) {
        format_text(text, o.refusal, head, r.close);
        co_await out.write_all(text);
        co_return;
    }
    format_head(text, "200 OK", o.size, r.close);
    co_await out.write_all(text);
    if (head || o.size == 0) co_return;
    if (o.size <= kInlineBody) {
        body.resize(o.size);
        co_await o.file->read_exact_at(body, 0);  // io::UnexpectedEof if it shrank meanwhile
        co_await out.write_all(std::span<const std::byte>(body));
        co_return;
    }
    co_await out.flush();  // the headers first, then the file after them
    const std::size_t sent = co_await s.send_file(*o.file, 0, o.size);
    if (sent < o.size) throw std::runtime_error("file_server: " + where.path + " shrank while being sent");
}

eddy::Task<void> serve_files(eddy::net::TcpStream& s, const examples::Drain& drain) {
    eddy::io::BufReader in(s, 8192, examples::http::kMaxLine);
    eddy::io::BufWriter out(s, 16384 + 512);  // room for a small file and its headers
    std::string line, text;
    std::vector<std::byte> body;
    for (;;) {
        Request r;  // on SIGTERM an idle connection ends here, a request already begun is answered
        const Outcome outcome = co_await examples::http::next_request(in, s, drain, line, r);
        if (outcome == Outcome::kEnd) break;
        if (outcome != Outcome::kRequest) {
            format_text(text, examples::http::status_of(outcome), false, true);
            co_await out.write_all(text);
            break;
        }
        co_await answer(s, out, r, text, body);
        if (r.close) break;
        if (in.buffer().empty()) co_await out.flush();  // pipelined requests are answered first
    }
    co_await out.flush();
}

}  // namespace

int main(int argc, char** argv) {
    // --root DIR is this server's own flag; the rest are run_tcp_server's.
    std::vector<char*> args{argv[0]};
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--root") == 0 && i + 1 < argc) g_root = argv[++i];
        else args.push_back(argv[i]);
    }
    struct stat st {};
    if (g_root.empty() || ::stat(g_root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        std::fprintf(stderr, "file_server: --root DIR must name a directory%s%s\n", g_root.empty() ? "" : ": ",
                     g_root.c_str());
        return 2;
    }
    const int root_fd = ::open(g_root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0) {
        std::fprintf(stderr, "file_server: --root %s: %s\n", g_root.c_str(), std::strerror(errno));
        return 2;
    }
    g_root_dir.emplace(eddy::io::FileDescriptor(root_fd));
    return examples::run_tcp_server("file_server", "a static-file HTTP/1.1 server (--root DIR)",
                                    static_cast<int>(args.size()), args.data(), serve_files);
}
