// with_timeout of a named operation, not moved: refused (the combinator takes it over).
#include <eddy/eddy.hpp>

using namespace std::chrono_literals;

eddy::Task<void> f(eddy::net::TcpStream& stream) {
    std::array<std::byte, 64> buf{};
    auto read = stream.read(buf);
    co_await eddy::with_timeout(read, 1s);
}
