// examples/basic_async.cpp: two pieces of work awaited together with when_all.
//
// fetch_data makes a real TCP request (to a tiny server this program starts on a free
// loopback port), compute_result sleeps 100 ms and returns 42. when_all runs both at once
// and resumes main_task when both are done. Prints:
//     Data: hello from the local server, Result: 42
#include <eddy/eddy.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>

namespace {

/// Reads from `s` until the peer closes (or, with `until_newline`, until a '\n' arrives).
eddy::Task<std::string> read_text(eddy::net::TcpStream& s, bool until_newline) {
    std::string text;
    std::array<std::byte, 1024> buf;
    for (;;) {
        const std::size_t n = co_await s.read(buf);
        if (n == 0) break;  // the peer closed its side
        text.append(reinterpret_cast<const char*>(buf.data()), n);
        if (until_newline && text.find('\n') != std::string::npos) break;
    }
    co_return text;
}

/// The local server: answers one request line with a greeting, then closes.
eddy::Task<void> serve_one(eddy::net::TcpListener listener) {
    eddy::net::TcpStream client = co_await listener.accept();
    co_await read_text(client, /*until_newline=*/true);  // e.g. "GET /data\n"
    co_await client.write_all("hello from the local server");
}  // `client` closes here: the peer reads end of stream

/// Sends a request to `server` and returns the whole reply.
eddy::Task<std::string> fetch_data(eddy::net::SocketAddr server) {
    eddy::net::TcpStream s = co_await eddy::net::TcpStream::connect(server);
    co_await s.write_all("GET /data\n");
    co_return co_await read_text(s, /*until_newline=*/false);
}

/// Stands in for a computation that takes a while.
eddy::Task<int> compute_result() {
    co_await eddy::sleep(std::chrono::milliseconds(100));
    co_return 42;
}

eddy::Task<void> main_task() {
    // Port 0: the kernel picks a free port; local_address() tells which.
    auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
    const eddy::net::SocketAddr addr = listener.local_address();
    eddy::JoinHandle<void> server = eddy::spawn(serve_one(std::move(listener)));

    auto [data, result] = co_await eddy::when_all(fetch_data(addr), compute_result());
    std::printf("Data: %s, Result: %d\n", data.c_str(), result);

    co_await std::move(server);  // rethrows if the server task failed
}

}  // namespace

int main() {
    // One worker per available CPU; from_env() lets the EDDY_* variables override that
    // (EDDY_WORKERS=1 for one worker). A plain `eddy::Runtime rt;` would read none of them.
    eddy::Runtime rt(eddy::RuntimeConfig::from_env());
    rt.block_on(main_task());
}
