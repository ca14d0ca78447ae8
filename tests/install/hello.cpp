// tests/install/hello.cpp: a user's program, built by tests/install/install_test.sh against an
// installed copy of eddy (`pkg-config --cflags --libs eddy`, nothing of the source tree) and
// by tests/subproject/ against eddy as a meson subproject (`dependency('eddy')`).
//
// It touches every layer: a Runtime, when_all, a sleep, a TCP round trip on loopback and a
// Channel. Prints exactly:
//     hello from eddy: echo=ping sum=4950 slept=yes
// Exit 77 (skip) where io_uring is unavailable.
#include <eddy/eddy.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <system_error>

namespace {

eddy::Task<void> echo_once(eddy::net::TcpListener listener) {
    eddy::net::TcpStream s = co_await listener.accept();
    std::array<std::byte, 4> buf;
    co_await s.read_exact(buf);
    co_await s.write_all(buf);
}

eddy::Task<std::string> round_trip(eddy::net::SocketAddr addr) {
    eddy::net::TcpStream s = co_await eddy::net::TcpStream::connect(addr);
    co_await s.write_all(std::string_view("ping"));
    std::array<std::byte, 4> buf;
    co_await s.read_exact(buf);
    co_return std::string(reinterpret_cast<const char*>(buf.data()), buf.size());
}

eddy::Task<int> channel_sum() {
    eddy::Channel<int> ch(8);
    auto producer = [](eddy::Channel<int>& c) -> eddy::Task<void> {
        for (int i = 0; i < 100; ++i) co_await c.send(i);
        c.close();
    };
    eddy::JoinHandle<void> p = eddy::spawn(producer(ch));
    int sum = 0;
    while (std::optional<int> v = co_await ch.receive()) sum += *v;
    co_await std::move(p);
    co_return sum;
}

eddy::Task<bool> nap() {
    const auto start = std::chrono::steady_clock::now();
    co_await eddy::sleep(std::chrono::milliseconds(20));
    co_return std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(20);
}

eddy::Task<void> main_task() {
    auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
    const eddy::net::SocketAddr addr = listener.local_address();
    eddy::JoinHandle<void> server = eddy::spawn(echo_once(std::move(listener)));
    auto [echo, sum, slept] = co_await eddy::when_all(round_trip(addr), channel_sum(), nap());
    co_await std::move(server);
    std::printf("hello from eddy: echo=%s sum=%d slept=%s\n", echo.c_str(), sum, slept ? "yes" : "no");
}

}  // namespace

int main() {
    try {
        eddy::Runtime rt(eddy::RuntimeConfig{.workers = 2});
        rt.block_on(main_task());
    } catch (const std::system_error& e) {
        if (std::string_view(e.what()).find("io_uring is unavailable") != std::string_view::npos) {
            std::printf("SKIP: %s\n", e.what());
            return 77;
        }
        throw;
    }
    return 0;
}
