// examples/support/http_request.hpp: reading HTTP/1.1 requests, what the HTTP examples
// (http_hello, file_server) share, so that each example file shows only its answers.
//   * read_request reads one request from an io::BufReader: the request line, at most 100
//     headers of at most 8 KiB each (a longer line is 431, never unbounded growth), and a
//     body announced by Content-Length, read and dropped (over 1 MiB: 413 at once);
//   * keep-alive is the default of HTTP/1.1; "Connection: close" (or HTTP/1.0 without
//     "Connection: keep-alive") sets Request::close;
//   * the framing is never ambiguous (RFC 9112 section 6.3; two parties that read a body's
//     length differently are how requests are smuggled past a proxy): a Content-Length that
//     is not a plain decimal number ("+5", "0x10", "5, 5", past 2^64), two Content-Length
//     headers that differ, or whitespace between a header's name and its colon are 400;
//     repeated Content-Length headers of one value count as one. "Transfer-Encoding"
//     (chunked bodies) is 501.
#pragma once

#include "tcp_server.hpp"

#include <eddy/eddy.hpp>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace examples::http {

constexpr std::size_t kMaxLine = 8 * 1024;
constexpr std::size_t kMaxHeaders = 100;
constexpr std::size_t kMaxBody = 1024 * 1024;  // a larger Content-Length answers 413

struct Request {
    std::string method, target;
    bool http10 = false;
    bool close = false;                         // the client asked for (or HTTP/1.0 implies) a closing connection
    std::optional<std::size_t> content_length;  // nullopt: no Content-Length header
};

enum class Outcome { kRequest, kEnd, kBadRequest, kTooLarge, kContentTooLarge, kNotImplemented };

inline bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
        if (lower(a[i]) != lower(b[i])) return false;
    }
    return true;
}

inline std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

/// "GET /path HTTP/1.1" into `r`; false when it is not a request line.
inline bool parse_request_line(std::string_view line, Request& r) {
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
inline std::optional<Outcome> parse_header(std::string_view line, Request& r) {
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

/// The next request on a keep-alive connection: while idle between requests, a drain
/// (SIGTERM) ends the connection (kEnd, examples::next_request); a request already begun is
/// read, and during a drain marked `close`, so that its answer says "Connection: close".
template <class Reader>
eddy::Task<Outcome> next_request(Reader& in, eddy::net::TcpStream& s, const examples::Drain& drain, std::string& line,
                                 Request& r) {
    if (in.buffer().empty() && !co_await examples::next_request(s, drain)) co_return Outcome::kEnd;
    const Outcome outcome = co_await read_request(in, line, r);
    if (outcome == Outcome::kRequest && drain.draining()) r.close = true;
    co_return outcome;
}

/// The status line of an Outcome that is not a request.
inline std::string_view status_of(Outcome o) {
    return o == Outcome::kBadRequest        ? "400 Bad Request"
           : o == Outcome::kTooLarge        ? "431 Request Header Fields Too Large"
           : o == Outcome::kContentTooLarge ? "413 Content Too Large"
                                            : "501 Not Implemented";
}

}  // namespace examples::http
