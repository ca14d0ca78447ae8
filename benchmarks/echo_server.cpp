// benchmarks/echo_server.cpp: a TCP echo server on 127.0.0.1:PORT, one task per connection
// with a 4 KiB buffer, until killed (shared/bench/SPEC.md). ../shared/anchors/loadgen drives
// it and prints the result line. Prints "echo_server runtime=eddy workers=N listening=ADDR"
// once it accepts connections.
// --buffered 1 echoes through io::BufReader / io::BufWriter instead (fill_buf, write_all,
// consume, flush when nothing more is buffered): what the buffered path costs over the
// hand-written loop (docs/performance/service-io.md).
#include "bench_main.hpp"

#include <array>

namespace {

eddy::Task<void> serve_buffered(eddy::net::TcpStream s) {
    try {
        s.set_nodelay(true);
        eddy::io::BufReader in(s, 4096);
        eddy::io::BufWriter out(s, 4096);
        for (;;) {
            const auto chunk = co_await in.fill_buf();
            if (chunk.empty()) co_return;
            co_await out.write_all(chunk);
            in.consume(chunk.size());
            if (in.buffer().empty()) co_await out.flush();
        }
    } catch (const std::system_error&) {
        // The client reset the connection: this one ends, the server goes on.
    }
}

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

eddy::Task<void> listen(std::uint16_t port, std::size_t workers, bool buffered) {
    auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(port));
    std::printf("echo_server runtime=eddy workers=%zu listening=%s\n", workers,
                listener.local_address().to_string().c_str());
    std::fflush(stdout);
    for (;;) {
        bool failed = false;
        try {
            auto conn = co_await listener.accept();
            eddy::spawn(buffered ? serve_buffered(std::move(conn)) : serve(std::move(conn)));
        } catch (const std::system_error& e) {
            std::fprintf(stderr, "echo_server: accept: %s\n", e.what());
            failed = true;
        }
        if (failed) co_await eddy::sleep(std::chrono::milliseconds(10));  // e.g. EMFILE: back off
    }
}

}  // namespace

int main(int argc, char** argv) {
    bench::Args args(argc, argv, "echo_server", {{"port", 7878}, {"buffered", 0}});
    const std::uint64_t port = args.get("port");
    if (port > 65535) bench::fail("echo_server", "--port out of range");
    eddy::Runtime rt(args.config());
    try {
        rt.block_on(listen(static_cast<std::uint16_t>(port), rt.workers(), args.get("buffered") != 0));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "echo_server: %s\n", e.what());
        return 1;
    }
}
