// spawn() of an operation that reads into the caller's buffer: refused, since the spawned
// task would run after the caller (and its buffer) moved on.
#include <eddy/eddy.hpp>

eddy::Task<void> f(eddy::net::TcpStream& stream) {
    std::array<std::byte, 64> buf{};
    eddy::spawn(stream.read(buf));
    co_return;
}
