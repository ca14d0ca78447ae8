// benchmarks/echo_server.cpp: a TCP echo server on 127.0.0.1:PORT, one task per connection
// with a 4 KiB buffer, until killed (shared/bench/SPEC.md). ../shared/anchors/loadgen drives
// it and prints the result line. Prints "echo_server runtime=eddy workers=N listening=ADDR"
// once it accepts connections.
#include "bench_main.hpp"

#include <array>

namespace {

eddy::Task<void> serve(eddy::net::TcpStream s) {
    std::array<std::byte, 4096> buf;
    try {
        s.set_nodelay(true);
        for (;;) {
            const std::size_t n = co_await s.read(buf);
            if (n == 0) co_return;
            co_await s.write_all(std::span(buf).first(n));
        }
    } catch (const std::system_error&) {
        // The client reset the connection: this one ends, the server goes on.
    }
}

eddy::Task<void> listen(std::uint16_t port, std::size_t workers) {
    auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(port));
    std::printf("echo_server runtime=eddy workers=%zu listening=%s\n", workers,
                listener.local_address().to_string().c_str());
    std::fflush(stdout);
    for (;;) {
        bool failed = false;
        try {
            eddy::spawn(serve(co_await listener.accept()));
        } catch (const std::system_error& e) {
            std::fprintf(stderr, "echo_server: accept: %s\n", e.what());
            failed = true;
        }
        if (failed) co_await eddy::sleep(std::chrono::milliseconds(10));  // e.g. EMFILE: back off
    }
}

} // namespace

int main(int argc, char** argv) {
    bench::Args args(argc, argv, "echo_server", {{"port", 7878}});
    const std::uint64_t port = args.get("port");
    if (port > 65535) bench::fail("echo_server", "--port out of range");
    eddy::Runtime rt(args.config());
    try {
        rt.block_on(listen(static_cast<std::uint16_t>(port), rt.workers()));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "echo_server: %s\n", e.what());
        return 1;
    }
}
