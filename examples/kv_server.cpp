// examples/kv_server.cpp: a key-value server speaking a subset of the Redis protocol (RESP2),
// enough for redis-cli and redis-benchmark, on eddy's framed streams (a RESP io::Decoder).
//
//     kv_server [--host ADDR] [--port N] [--workers N] [--drain-timeout MS]
//     redis-benchmark -p 7878 -t set,get -n 100000 -c 50 -P 16 -q
//
// Commands: PING [message], ECHO message, SET key value, GET key, DEL key [key ...],
// CONFIG GET parameter (the parameter with an empty value: redis-benchmark asks at start),
// COMMAND (an empty list). Requests come as RESP arrays of bulk strings ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"),
// or inline as one line of words ("PING\r\n", what a person types over telnet).
//   * Pipelining: answers go into an io::BufWriter, flushed only when no further request is
//     already buffered, so a pipeline of N requests costs one write.
//   * Errors the client made (an unknown command, a wrong number of arguments) get a "-ERR"
//     answer and the connection goes on; a protocol error (a malformed line, a line over
//     64 KiB, a bulk string announced longer than 1 MiB, bulk strings of one request announced
//     longer than 2 MiB together, an array of more than 1024 elements) gets
//     "-ERR Protocol error: ..." and the connection is closed, as Redis does.
//   * What a peer can make the server hold: per connection, its two 16 KiB buffers (the
//     read buffer grows to about 64 KiB for a long line) and the request being received, which grows
//     with the bytes that actually came (a length announced in "$N" is checked, never
//     allocated up front) and is at most 2 MiB of data; so 300 connections that each announce a
//     1 MiB value and send one byte of it cost about 12 MiB, not 313. Redis allows 512 MiB
//     per bulk string (proto-max-bulk-len); 1 MiB is this example's choice, ample for
//     redis-benchmark. There is no cap on the number of connections or on the data SET
//     stores (Redis's maxclients and maxmemory), which grow with what peers send.
// The data lives in 16 shards, each a std::unordered_map under a std::mutex: a lock is held
// for one map operation, never across a co_await, so a plain mutex is the right tool.
// The command line, the accept loop and the shutdown are the other server examples'
// (examples/support/tcp_server.hpp). On SIGINT/SIGTERM the server drains: a command already
// begun (some of its bytes arrived) is read, run and answered, a connection waiting for its
// next command is closed (examples::next_request), and the server exits once all are closed
// or --drain-timeout has passed. First line:
//     kv_server runtime=eddy workers=2 listening=127.0.0.1:7878
#include "support/tcp_server.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <utility>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace {

// What one connection may make the server hold (see the top of the file).
constexpr std::size_t kMaxLine = 64 * 1024;        // an inline request or a "*N" / "$N" line
constexpr std::size_t kMaxBulk = 1024 * 1024;      // one bulk string
constexpr std::size_t kMaxRequest = 2 * kMaxBulk;  // the bulk strings of one request together
constexpr std::size_t kMaxArgs = 1024;

class Store {
public:
    void set(std::string key, std::string value) {
        Shard& s = shard(key);
        std::lock_guard lock(s.lock);
        s.map.insert_or_assign(std::move(key), std::move(value));
    }
    std::optional<std::string> get(const std::string& key) {
        Shard& s = shard(key);
        std::lock_guard lock(s.lock);
        auto it = s.map.find(key);
        if (it == s.map.end()) return std::nullopt;
        return it->second;
    }
    bool erase(const std::string& key) {
        Shard& s = shard(key);
        std::lock_guard lock(s.lock);
        return s.map.erase(key) != 0;
    }

private:
    struct alignas(64) Shard {
        std::mutex lock;
        std::unordered_map<std::string, std::string> map;
    };
    Shard& shard(const std::string& key) { return shards_[std::hash<std::string>{}(key) % shards_.size()]; }
    std::array<Shard, 16> shards_;
};

Store g_store;

/// A protocol error: answered, then the connection closes.
struct ProtocolError {
    std::string what;
};

/// A whole number that fills `text`, in [lo, hi].
std::optional<long long> parse_int(std::string_view text, long long lo, long long hi) {
    long long n = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || n < lo || n > hi) return std::nullopt;
    return n;
}

/// RESP requests cut out of the bytes received (an io::Decoder for io::FramedRead): each item
/// is one request's words, empty for an empty inline line. A protocol error is thrown as
/// ProtocolError. What it has parsed of a request is consumed from the buffer at once and
/// kept here, a bulk string growing with the bytes that came (never to its announced length
/// up front), so the read buffer holds at most one line and one read.
class RespDecoder {
public:
    using Item = std::vector<std::string>;

    std::optional<Item> decode(eddy::io::ByteBuffer& in) {
        for (;;) {
            if (want_ > 0) {  // inside a bulk string: take what came of it
                const std::string_view here = in.view().substr(0, want_);
                args_.back().append(here);
                in.consume(here.size());
                want_ -= here.size();
                if (want_ > 0) return std::nullopt;
                std::string& arg = args_.back();
                if (arg[arg.size() - 2] != '\r' || arg.back() != '\n') throw ProtocolError{"bulk string without CRLF"};
                arg.resize(arg.size() - 2);
                if (args_.size() == count_) return finish();
            }
            const std::optional<std::string_view> line = take_line(in);
            if (!line) return std::nullopt;
            if (count_ == 0 && (line->empty() || (*line)[0] != '*')) {  // inline: words separated by spaces
                for (std::size_t at = 0; at < line->size();) {
                    const std::size_t end = std::min(line->find(' ', at), line->size());
                    if (end > at) args_.emplace_back(line->substr(at, end - at));
                    at = end + 1;
                }
                in.consume(line_bytes_);
                return finish();
            }
            if (count_ == 0) {
                const auto count = parse_int(line->substr(1), -1, kMaxArgs);
                if (!count) throw ProtocolError{"invalid multibulk length"};
                in.consume(line_bytes_);
                if (*count <= 0) return finish();  // "*0" and "*-1": a request of no words
                count_ = static_cast<std::size_t>(*count);
                continue;
            }
            if (line->empty() || (*line)[0] != '$') throw ProtocolError{"expected '$'"};
            const auto len = parse_int(line->substr(1), 0, kMaxBulk);
            if (!len) throw ProtocolError{"invalid bulk length"};
            request_ += static_cast<std::size_t>(*len);
            if (request_ > kMaxRequest) throw ProtocolError{"too big request"};
            in.consume(line_bytes_);
            args_.emplace_back();
            want_ = static_cast<std::size_t>(*len) + 2;  // with its CRLF
        }
    }

    /// At the end of the stream: a last inline line without "\n" is a request; the end
    /// inside a request is a protocol error.
    std::optional<Item> decode_eof(eddy::io::ByteBuffer& in) {
        if (auto request = decode(in)) return request;
        if (count_ > 0 || want_ > 0) throw ProtocolError{"unexpected end of stream"};
        if (in.empty()) return std::nullopt;
        in.append(std::string_view("\n"));
        return decode(in);
    }

private:
    /// The next line without "\n" or "\r\n" (line_bytes_ set to consume it whole), or
    /// nullopt until it is here; a ProtocolError past kMaxLine.
    std::optional<std::string_view> take_line(eddy::io::ByteBuffer& in) {
        const std::string_view text = in.view();
        const std::size_t nl = text.substr(0, kMaxLine).find('\n');
        if (nl == std::string_view::npos) {
            if (text.size() < kMaxLine) return std::nullopt;
            throw ProtocolError{count_ == 0 ? "too big inline request" : "too big bulk count string"};
        }
        line_bytes_ = nl + 1;
        return text.substr(0, nl > 0 && text[nl - 1] == '\r' ? nl - 1 : nl);
    }

    Item finish() {
        count_ = 0;
        request_ = 0;
        return std::exchange(args_, {});
    }

    std::size_t count_ = 0;    // the words of the array being read, 0 between requests
    std::size_t want_ = 0;     // the bytes of the bulk string being read still to come, CRLF included
    std::size_t request_ = 0;  // the bulk lengths announced so far in this request
    std::size_t line_bytes_ = 0;
    Item args_;
};

void bulk(std::string& out, std::string_view s) {
    out.append("$").append(std::to_string(s.size())).append("\r\n").append(s).append("\r\n");
}

bool upper_equals(std::string_view word, std::string_view upper) {
    if (word.size() != upper.size()) return false;
    for (std::size_t i = 0; i < word.size(); ++i)
        if ((word[i] >= 'a' && word[i] <= 'z' ? word[i] - 'a' + 'A' : word[i]) != upper[i]) return false;
    return true;
}

/// Runs one command; its answer goes to the end of `out`.
void execute(std::vector<std::string>& args, std::string& out) {
    const std::string_view cmd = args[0];
    const std::size_t n = args.size();
    const auto wrong_arity = [&] {
        out.append("-ERR wrong number of arguments for '").append(cmd).append("' command\r\n");
    };
    if (upper_equals(cmd, "PING")) {
        if (n == 1) out.append("+PONG\r\n");
        else if (n == 2) bulk(out, args[1]);
        else wrong_arity();
    } else if (upper_equals(cmd, "ECHO")) {
        if (n == 2) bulk(out, args[1]);
        else wrong_arity();
    } else if (upper_equals(cmd, "SET")) {
        if (n != 3) return wrong_arity();
        g_store.set(std::move(args[1]), std::move(args[2]));
        out.append("+OK\r\n");
    } else if (upper_equals(cmd, "GET")) {
        if (n != 2) return wrong_arity();
        if (auto v = g_store.get(args[1])) bulk(out, *v);
        else out.append("$-1\r\n");
    } else if (upper_equals(cmd, "DEL")) {
        if (n < 2) return wrong_arity();
        std::size_t removed = 0;
        for (std::size_t i = 1; i < n; ++i) removed += g_store.erase(args[i]) ? 1 : 0;
        out.append(":").append(std::to_string(removed)).append("\r\n");
    } else if (upper_equals(cmd, "CONFIG") && n == 3 && upper_equals(args[1], "GET")) {
        out.append("*2\r\n");  // the parameter with an empty value: nothing is configurable here
        bulk(out, args[2]);
        bulk(out, "");
    } else if (upper_equals(cmd, "COMMAND")) {
        out.append("*0\r\n");
    } else {
        out.append("-ERR unknown command '").append(cmd).append("'\r\n");
    }
}

eddy::Task<void> serve_kv(eddy::net::TcpStream& s, const examples::Drain& drain) {
    eddy::io::FramedRead in(s, RespDecoder{}, 16384);
    eddy::io::BufWriter out(s, 16384);
    std::string answer;
    for (;;) {
        // Idle between commands: on SIGTERM the connection closes here. A command already
        // begun is read and answered.
        if (in.read_buffer().empty() && !co_await examples::next_request(s, drain)) break;
        std::optional<std::vector<std::string>> args;
        std::optional<ProtocolError> error;
        try {
            args = co_await in.next();
        } catch (ProtocolError& e) {
            error = std::move(e);
        }
        if (error) {
            answer.assign("-ERR Protocol error: ").append(error->what).append("\r\n");
            co_await out.write_all(answer);
            break;
        }
        if (!args) break;             // the client closed between requests
        if (args->empty()) continue;  // an empty inline line: nothing to answer
        answer.clear();
        execute(*args, answer);
        co_await out.write_all(answer);
        // Pipelined requests already here are answered before anything is sent.
        if (in.read_buffer().empty()) co_await out.flush();
    }
    co_await out.flush();
}

}  // namespace

int main(int argc, char** argv) {
    return examples::run_tcp_server("kv_server", "a Redis-protocol key-value server", argc, argv, serve_kv);
}
