// examples/echo_server.cpp: a TCP echo server, one task per connection, all in a TaskGroup.
//
//     echo_server [--host ADDR] [--port N] [--workers N]
//
// Shows an accept loop that spawns a task for every connection into a TaskGroup, a
// read/write loop over a 4 KiB buffer, where errors go, and a clean shutdown:
//   * a connection that fails (the client reset it) ends that connection only;
//   * an accept that fails (e.g. EMFILE, out of descriptors) is reported and retried after a
//     short sleep;
//   * SIGINT or SIGTERM cancels the group: the pending accept and every connection's read or
//     write end with eddy::OperationCancelled, each connection's socket closes as its task
//     unwinds, and once all are gone the server prints one line and exits with status 0.
// The command line, the accept loop, where errors go and the shutdown are shared with the
// other server examples (examples/support/tcp_server.hpp). Listens on 127.0.0.1:7878 unless
// told otherwise (--port, or EDDY_PORT in the environment; port 0 picks a free port).
// --workers sets the worker threads (else EDDY_WORKERS in the environment, else one per CPU:
// the command line beats the environment). Prints one line once it accepts connections, and
// one when it has shut down:
//     echo_server runtime=eddy workers=2 listening=127.0.0.1:7878
//     echo_server: SIGTERM, shut down; 3 connections closed
#include "support/tcp_server.hpp"

#include <array>
#include <cstddef>
#include <span>

namespace {

eddy::Task<void> echo(eddy::net::TcpStream s) {
    s.set_nodelay(true);  // echo each chunk at once instead of waiting to coalesce
    std::array<std::byte, 4096> buf;
    for (;;) {
        const std::size_t n = co_await s.read(buf);
        if (n == 0) co_return;  // the peer closed its side
        co_await s.write_all(std::span(buf).first(n));
    }
}

}  // namespace

int main(int argc, char** argv) {
    return examples::run_tcp_server("echo_server", "a TCP echo server", argc, argv, echo);
}
