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
#include "support/http_request.hpp"
#include "support/tcp_server.hpp"

#include <string>
#include <string_view>

namespace {

constexpr std::string_view kHello = "Hello, world!";

using examples::http::Outcome;
using examples::http::Request;

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

eddy::Task<void> serve_http(eddy::net::TcpStream& s, const examples::Drain& drain) {
    eddy::io::BufReader in(s, 8192, examples::http::kMaxLine);
    eddy::io::BufWriter out(s, 16384);
    std::string line, text;
    for (;;) {
        // On SIGTERM an idle connection closes here; a request already begun is answered.
        Request r;
        const Outcome outcome = co_await examples::http::next_request(in, s, drain, line, r);
        if (outcome == Outcome::kEnd) break;
        if (outcome != Outcome::kRequest) {
            const std::string_view status = examples::http::status_of(outcome);
            format_answer(text, status, status, false, true);
            co_await out.write_all(text);
            break;
        }
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
