// examples/kv_server.cpp: a key-value server speaking a subset of the Redis protocol (RESP2),
// enough for redis-cli and redis-benchmark, on eddy's buffered streams.
//
//     kv_server [--host ADDR] [--port N] [--workers N]
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
//     reader's grows to 64 KiB for a long line) and the request being received, which grows
//     with the bytes that actually came (a length announced in "$N" is checked, never
//     allocated up front) and is at most 2 MiB of data; so 300 connections that each announce a
//     1 MiB value and send one byte of it cost about 12 MiB, not 313. Redis allows 512 MiB
//     per bulk string (proto-max-bulk-len); 1 MiB is this example's choice, ample for
//     redis-benchmark. There is no cap on the number of connections or on the data SET
//     stores (Redis's maxclients and maxmemory), which grow with what peers send.
// The data lives in 16 shards, each a std::unordered_map under a std::mutex: a lock is held
// for one map operation, never across a co_await, so a plain mutex is the right tool.
// The command line, the accept loop and the shutdown (SIGINT/SIGTERM) are the other server
// examples' (examples/support/tcp_server.hpp). First line:
//     kv_server runtime=eddy workers=2 listening=127.0.0.1:7878
#include "support/tcp_server.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
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

/// Reads one request into `args`; false at end of stream (between requests), a
/// ProtocolError for what cannot be parsed.
template <class Reader>
eddy::Task<std::optional<ProtocolError>> read_command(Reader& in, std::string& line, std::vector<std::string>& args,
                                                      bool& more) {
    args.clear();
    more = false;
    try {
        if (!co_await in.read_line(line)) co_return std::nullopt;
    } catch (const eddy::io::LineTooLong&) {
        co_return ProtocolError{"too big inline request"};
    }
    if (line.empty() || line[0] != '*') {  // inline: words separated by spaces
        for (std::size_t at = 0; at < line.size();) {
            const std::size_t end = std::min(line.find(' ', at), line.size());
            if (end > at) args.emplace_back(line, at, end - at);
            at = end + 1;
        }
        more = true;
        co_return std::nullopt;
    }
    const auto count = parse_int(std::string_view(line).substr(1), -1, kMaxArgs);
    if (!count) co_return ProtocolError{"invalid multibulk length"};
    std::size_t request = 0;  // the bulk lengths announced so far
    for (long long i = 0; i < *count; ++i) {
        bool got = false;
        try {
            got = co_await in.read_line(line);
        } catch (const eddy::io::LineTooLong&) {
            co_return ProtocolError{"too big bulk count string"};
        }
        if (!got) co_return ProtocolError{"unexpected end of stream"};
        if (line.empty() || line[0] != '$') co_return ProtocolError{"expected '$'"};
        const auto len = parse_int(std::string_view(line).substr(1), 0, kMaxBulk);
        if (!len) co_return ProtocolError{"invalid bulk length"};
        request += static_cast<std::size_t>(*len);
        if (request > kMaxRequest) co_return ProtocolError{"too big request"};
        // The string grows with the bytes that came, never to the announced length up front:
        // a peer that announces 1 MiB and sends 1 byte makes the server hold 1 byte.
        std::string& arg = args.emplace_back();
        const std::size_t want = static_cast<std::size_t>(*len) + 2;  // with its CRLF
        while (arg.size() < want) {
            const auto chunk = co_await in.fill_buf();
            if (chunk.empty()) co_return ProtocolError{"unexpected end of stream"};
            const std::size_t n = std::min(chunk.size(), want - arg.size());
            arg.append(reinterpret_cast<const char*>(chunk.data()), n);
            in.consume(n);
        }
        if (arg[arg.size() - 2] != '\r' || arg.back() != '\n') co_return ProtocolError{"bulk string without CRLF"};
        arg.resize(arg.size() - 2);
    }
    more = true;
    co_return std::nullopt;
}

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

eddy::Task<void> serve_kv(eddy::net::TcpStream s) {
    s.set_nodelay(true);
    eddy::io::BufReader in(s, 16384, kMaxLine);
    eddy::io::BufWriter out(s, 16384);
    std::string line, answer;
    std::vector<std::string> args;
    for (;;) {
        bool more = false;
        if (auto error = co_await read_command(in, line, args, more)) {
            answer.assign("-ERR Protocol error: ").append(error->what).append("\r\n");
            co_await out.write_all(answer);
            break;
        }
        if (!more) break;            // the client closed between requests
        if (args.empty()) continue;  // an empty inline line: nothing to answer
        answer.clear();
        execute(args, answer);
        co_await out.write_all(answer);
        // Pipelined requests already here are answered before anything is sent.
        if (in.buffer().empty()) co_await out.flush();
    }
    co_await out.flush();
}

}  // namespace

int main(int argc, char** argv) {
    return examples::run_tcp_server("kv_server", "a Redis-protocol key-value server", argc, argv, serve_kv);
}
