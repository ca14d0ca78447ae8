// examples/http_hello.cpp: an HTTP/1.1 keep-alive server that answers "Hello, world!",
// written the way a service would write it on eddy's buffered streams.
//
//     http_hello [--host ADDR] [--port N] [--workers N] [--drain-timeout MS]
//     wrk -t2 -c64 -d5s http://127.0.0.1:7878/
//
// One task per connection reads requests through an io::BufReader and answers through an
// io::BufWriter:
//   * keep-alive is the default of HTTP/1.1; "Connection: close" (or HTTP/1.0 without
//     "Connection: keep-alive") closes after the answer;
//   * pipelining: a client may send several requests before reading an answer. Answers are
//     written in order into the BufWriter, which is flushed only when no further request is
//     already buffered, so a batch of pipelined requests costs one write;
//   * a body announced by Content-Length is read and dropped; "Transfer-Encoding" (chunked
//     bodies) is answered 501 and the connection closed;
//   * GET and HEAD of "/" answer 200, other paths 404, other methods 405;
//   * bad input closes the connection after a clear answer: a malformed request line or
//     header 400, a line longer than 8 KiB or more than 100 headers 431 (the BufReader's
//     bounded line length: io::LineTooLong, never unbounded growth);
//   * the framing is never ambiguous (RFC 9112 section 6.3; two parties that read a body's
//     length differently are how requests are smuggled past a proxy): a Content-Length that
//     is not a plain decimal number ("+5", "0x10", "5, 5", past 2^64), two Content-Length
//     headers that differ, or whitespace between a header's name and its colon answer 400;
//     a Content-Length over 1 MiB answers 413 at once, without waiting for the body (this
//     server takes no uploads). Repeated Content-Length headers of one value count as one.
//   * What a peer can make the server hold: per connection, an 8 KiB read buffer (a line
//     longer than that is the 431 above), a 16 KiB write buffer and the request line and
//     one header line at a time; a body is dropped as it comes, never stored.
// The command line, the accept loop and the shutdown are the other server examples'
// (examples/support/tcp_server.hpp). On SIGINT/SIGTERM the server drains: a request already
// begun (some of its bytes arrived) is read and answered with "Connection: close", then its
// connection closes; a keep-alive connection waiting for its next request is closed
// (examples::next_request); the server exits once all are closed or --drain-timeout has
// passed. First line:
//     http_hello runtime=eddy workers=2 listening=127.0.0.1:7878
#include "support/tcp_server.hpp"

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace {

constexpr std::size_t kMaxLine = 8 * 1024;
constexpr std::size_t kMaxHeaders = 100;
constexpr std::size_t kMaxBody = 1024 * 1024;  // a larger Content-Length answers 413
constexpr std::string_view kHello = "Hello, world!";

struct Request {
    std::string method, target;
    bool http10 = false;
    bool close = false;                         // the client asked for (or HTTP/1.0 implies) a closing connection
    std::optional<std::size_t> content_length;  // nullopt: no Content-Length header
};

enum class Outcome { kRequest, kEnd, kBadRequest, kTooLarge, kContentTooLarge, kNotImplemented };

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
        if (lower(a[i]) != lower(b[i])) return false;
    }
    return true;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

/// "GET /path HTTP/1.1" into `r`; false when it is not a request line.
bool parse_request_line(std::string_view line, Request& r) {
    const std::size_t sp1 = line.find(' ');
    const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp1 == 0 || sp2 == std::string_view::npos || sp2 == sp1 + 1) return false;
    const std::string_view version = line.substr(sp2 + 1);
    if (version != "HTTP/1.1" && version != "HTTP/1.0") return false;
    r.method = line.substr(0, sp1);
    r.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    r.http10 = version == "HTTP/1.0";
    r.close = r.http10;
    return true;
}

/// One header line into `r`; the Outcome to answer with when it cannot be taken.
std::optional<Outcome> parse_header(std::string_view line, Request& r) {
    const std::size_t colon = line.find(':');
    if (colon == 0 || colon == std::string_view::npos) return Outcome::kBadRequest;
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = trim(line.substr(colon + 1));
    // "Content-Length : 5" (or a folded line, starting with a space) is not Content-Length
    // to us, but may be to a proxy in front of us (RFC 9112 section 5.1).
    if (name.find_first_of(" \t") != std::string_view::npos) return Outcome::kBadRequest;
    if (iequals(name, "content-length")) {
        // Digits only: from_chars into an unsigned type takes no sign, no space, no "0x";
        // a number past size_t's range is result_out_of_range.
        std::size_t n = 0;
        auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
        if (value.empty() || ec != std::errc{} || end != value.data() + value.size()) return Outcome::kBadRequest;
        if (r.content_length && *r.content_length != n) return Outcome::kBadRequest;
        if (n > kMaxBody) return Outcome::kContentTooLarge;
        r.content_length = n;
    } else if (iequals(name, "connection")) {
        if (iequals(value, "close")) r.close = true;
        if (iequals(value, "keep-alive")) r.close = false;
    } else if (iequals(name, "transfer-encoding")) {
        return Outcome::kNotImplemented;
    }
    return std::nullopt;
}

/// Reads one request (its line, headers and body) into `r`.
template <class Reader>
eddy::Task<Outcome> read_request(Reader& in, std::string& line, Request& r) {
    try {
        // Empty lines before a request are allowed (RFC 9112, 2.2).
        do {
            if (!co_await in.read_line(line)) co_return Outcome::kEnd;
        } while (line.empty());
        if (!parse_request_line(line, r)) co_return Outcome::kBadRequest;
        for (std::size_t headers = 0;; ++headers) {
            if (!co_await in.read_line(line)) co_return Outcome::kEnd;  // cut off mid-request
            if (line.empty()) break;
            if (headers == kMaxHeaders) co_return Outcome::kTooLarge;
            if (auto bad = parse_header(line, r)) co_return *bad;
        }
    } catch (const eddy::io::LineTooLong&) {
        co_return Outcome::kTooLarge;
    }
    // Drop the body.
    for (std::size_t left = r.content_length.value_or(0); left > 0;) {
        const auto chunk = co_await in.fill_buf();
        if (chunk.empty()) co_return Outcome::kEnd;
        const std::size_t n = std::min(left, chunk.size());
        in.consume(n);
        left -= n;
    }
    co_return Outcome::kRequest;
}

/// A whole answer (status line, headers, body) into `text`.
void format_answer(std::string& text, std::string_view status, std::string_view body, bool head, bool close) {
    text.assign("HTTP/1.1 ").append(status).append("\r\nServer: eddy\r\nContent-Type: text/plain\r\nContent-Length: ");
    text.append(std::to_string(body.size()));
    text.append(close ? "\r\nConnection: close\r\n\r\n" : "\r\n\r\n");
    if (!head) text.append(body);
}

/// The answer to a well-formed request.
void answer_request(std::string& text, const Request& r) {
    const bool head = r.method == "HEAD";
    if (r.method != "GET" && !head) format_answer(text, "405 Method Not Allowed", "Method Not Allowed", false, r.close);
    else if (r.target != "/") format_answer(text, "404 Not Found", "Not Found", head, r.close);
    else format_answer(text, "200 OK", kHello, head, r.close);
}

eddy::Task<void> serve_http(eddy::net::TcpStream s, const examples::Drain& drain) {
    s.set_nodelay(true);
    eddy::io::BufReader in(s, 8192, kMaxLine);
    eddy::io::BufWriter out(s, 16384);
    std::string line, text;
    for (;;) {
        // Idle between requests: on SIGTERM the connection closes here. A request already
        // begun is read and answered.
        if (in.buffer().empty() && !co_await examples::next_request(s, drain)) break;
        Request r;
        const Outcome outcome = co_await read_request(in, line, r);
        if (outcome == Outcome::kEnd) break;
        if (outcome != Outcome::kRequest) {
            const std::string_view status = outcome == Outcome::kBadRequest ? "400 Bad Request"
                                            : outcome == Outcome::kTooLarge ? "431 Request Header Fields Too Large"
                                            : outcome == Outcome::kContentTooLarge ? "413 Content Too Large"
                                                                                   : "501 Not Implemented";
            format_answer(text, status, status, false, true);
            co_await out.write_all(text);
            break;
        }
        if (drain.draining()) r.close = true;  // the answer says "Connection: close"
        answer_request(text, r);
        co_await out.write_all(text);
        if (r.close) break;
        // Pipelined requests already here are answered before anything is sent.
        if (in.buffer().empty()) co_await out.flush();
    }
    co_await out.flush();  // the socket closes as this frame goes: the peer sees end of stream
}

}  // namespace

int main(int argc, char** argv) {
    return examples::run_tcp_server("http_hello", "an HTTP/1.1 keep-alive server", argc, argv, serve_http);
}
