// examples/echo_server.cpp: a TCP echo server, one task per connection, drained on SIGTERM.
//
//     echo_server [--host ADDR] [--port N] [--workers N] [--drain-timeout MS]
//
// Shows an accept loop that spawns a task for every connection into a TaskTracker, a
// read/write loop over a 4 KiB buffer, where errors go, and a graceful shutdown:
//   * a connection that fails (the client reset it) ends that connection only;
//   * an accept that fails (e.g. EMFILE, out of descriptors) is reported and retried after a
//     short sleep;
//   * SIGINT or SIGTERM closes the listener (new connections are refused) and drains the
//     connections. Echo has no requests, so "idle" is "nothing received waiting": the bytes
//     that have arrived are echoed, and a connection closes as soon as none is waiting
//     (examples::next_request). Once all are closed, or --drain-timeout MS (default 5000) has
//     passed and the rest were cancelled, the server prints its last line and exits 0.
// The command line, the accept loop, where errors go and the shutdown are shared with the
// other server examples (examples/support/tcp_server.hpp). Listens on 127.0.0.1:7878 unless
// told otherwise (--port, or EDDY_PORT in the environment; port 0 picks a free port).
// --workers sets the worker threads (else EDDY_WORKERS in the environment, else one per CPU:
// the command line beats the environment). Prints one line once it accepts connections, and
// two when it shuts down:
//     echo_server runtime=eddy workers=2 listening=127.0.0.1:7878
//     echo_server: SIGTERM, draining 3 connections
//     echo_server: SIGTERM, shut down; 3 connections closed
#include "support/tcp_server.hpp"

#include <array>
#include <cstddef>
#include <span>

namespace {

eddy::Task<void> echo(eddy::net::TcpStream& s, const examples::Drain& drain) {
    std::array<std::byte, 4096> buf;
    for (;;) {
        // Echo has no requests: while draining, what has arrived is echoed, and the
        // connection closes once nothing more is waiting.
        if (!co_await examples::next_request(s, drain)) co_return;
        const std::size_t n = co_await s.read(buf);
        if (n == 0) co_return;  // the peer closed its side
        co_await s.write_all(std::span(buf).first(n));
    }
}

}  // namespace

int main(int argc, char** argv) {
    return examples::run_tcp_server("echo_server", "a TCP echo server", argc, argv, echo);
}
