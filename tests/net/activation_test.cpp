// tests/net/activation_test.cpp: sockets made elsewhere, and sockets set up before bind:
//   - from_fd: TcpListener, UnixListener, UdpSocket and TcpStream adopt the right kind of
//     descriptor (close-on-exec after, non-blocking for listeners, blocking for the others,
//     and it works: a connection accepted, a datagram sent), and refuse every wrong kind
//     with std::system_error naming the descriptor, what it is and what was expected: a UDP
//     socket, a TCP socket not listening, a Unix socket, a pipe (ENOTSOCK), a closed
//     descriptor (EBADF);
//   - listen_fds: LISTEN_PID of another process (nothing, variables removed), no LISTEN_PID,
//     bad LISTEN_PID / LISTEN_FDS values and a LISTEN_FDNAMES of the wrong count
//     (std::invalid_argument), unset_env false keeping the variables; and in a forked child
//     (descriptors 3 and 4 are the test's own otherwise): two sockets passed with names,
//     adopted and accepting, and a descriptor announced but not open (EBADF);
//   - TcpSocket: options read back; SO_REUSEPORT lets two listeners share a port (a third
//     without it gets EADDRINUSE naming the address); IPV6_V6ONLY off takes an IPv4 client,
//     on refuses it (skipped without IPv6); bind-before-connect: the accepted peer sees the
//     chosen local port; a refused connect names the address.
// The systemd-style test that execs a server with LISTEN_FDS is in
// tests/examples/handover_test.cpp (it needs the example binary).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include <eddy/net/activation.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/net/tcp_socket.hpp>
#include <eddy/net/tcp_stream.hpp>
#include <eddy/net/udp_socket.hpp>
#include <eddy/net/unix_listener.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/tasks/task.hpp>

#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::io::FileDescriptor;
using eddy::net::SocketAddr;
using eddy::net::TcpListener;
using eddy::net::TcpSocket;
using eddy::net::TcpStream;
using eddy::test::run;

namespace {

/// A plain POSIX socket (no close-on-exec, blocking), bound to loopback port 0 for IPv4.
FileDescriptor raw_socket(int family, int type, bool bind_it, bool listen_it) {
    FileDescriptor fd(::socket(family, type, 0));
    REQUIRE(fd.get() >= 0);
    if (bind_it && family == AF_INET) {
        const auto a = SocketAddr::loopback_v4(0);
        REQUIRE(::bind(fd.get(), a.native(), a.native_size()) == 0);
    } else if (bind_it && family == AF_UNIX) {
        sockaddr_un un{};
        un.sun_family = AF_UNIX;  // autobind: an abstract name the kernel picks
        REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&un), sizeof(sa_family_t)) == 0);
    }
    if (listen_it) REQUIRE(::listen(fd.get(), 16) == 0);
    return fd;
}

bool cloexec(int fd) { return (::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0; }
bool nonblocking(int fd) { return (::fcntl(fd, F_GETFL) & O_NONBLOCK) != 0; }

/// What `adopt(fd)` throws: its code and message (a default code when nothing is thrown).
template <class Adopt>
std::pair<std::error_code, std::string> refusal(Adopt adopt, FileDescriptor fd) {
    try {
        adopt(std::move(fd));
    } catch (const std::system_error& e) {
        return {e.code(), e.what()};
    }
    return {};
}

void check_contains(const std::string& text, const char* part) {
    INFO(text);
    CHECK(text.find(part) != std::string::npos);
}

}  // namespace

TEST_CASE("TcpListener::from_fd adopts a listening TCP socket and refuses every other kind") {
    Runtime rt(RuntimeConfig{.workers = 1});
    FileDescriptor raw = raw_socket(AF_INET, SOCK_STREAM, true, true);
    const int number = raw.get();
    auto listener = TcpListener::from_fd(std::move(raw));
    CHECK(listener.native_handle() == number);
    CHECK(cloexec(number));
    CHECK(nonblocking(number));
    auto [client, server] = run(rt, eddy::test::connect_pair(listener));
    CHECK(client.peer_address() == server.local_address());

    auto adopt = [](FileDescriptor fd) { TcpListener::from_fd(std::move(fd)); };
    FileDescriptor udp = raw_socket(AF_INET, SOCK_DGRAM, true, false);
    const std::string udp_number = std::to_string(udp.get());
    auto [code, text] = refusal(adopt, std::move(udp));
    CHECK(code == std::errc::invalid_argument);
    check_contains(text, ("eddy::net::TcpListener::from_fd: descriptor " + udp_number).c_str());
    check_contains(text, "expected a listening TCP socket, found an IPv4 datagram socket");

    std::tie(code, text) = refusal(adopt, raw_socket(AF_INET, SOCK_STREAM, true, false));
    CHECK(code == std::errc::invalid_argument);
    check_contains(text, "expected a listening TCP socket, found an IPv4 stream socket that is not listening");

    std::tie(code, text) = refusal(adopt, raw_socket(AF_UNIX, SOCK_STREAM, true, true));
    CHECK(code == std::errc::invalid_argument);
    check_contains(text, "expected a listening TCP socket, found a Unix stream socket that is listening");

    int p[2];
    REQUIRE(::pipe(p) == 0);
    FileDescriptor write_end(p[1]);
    std::tie(code, text) = refusal(adopt, FileDescriptor(p[0]));
    CHECK(code == std::errc::not_a_socket);
    check_contains(text, "expected a listening TCP socket, found a descriptor that is not a socket");
    CHECK(::fcntl(p[0], F_GETFD) < 0);  // given away, so closed

    // A number nobody has open (well past the descriptors this process uses).
    std::tie(code, text) = refusal(adopt, FileDescriptor(1000000 - 7));
    CHECK(code == std::errc::bad_file_descriptor);
    check_contains(text, "descriptor 999993");
}

TEST_CASE("UnixListener, UdpSocket and TcpStream::from_fd adopt their kind only") {
    Runtime rt(RuntimeConfig{.workers = 1});
    {
        FileDescriptor raw = raw_socket(AF_UNIX, SOCK_STREAM, true, true);
        const int number = raw.get();
        auto listener = eddy::net::UnixListener::from_fd(std::move(raw));
        CHECK(cloexec(number));
        CHECK(nonblocking(number));
        auto [code, text] = refusal([](FileDescriptor fd) { eddy::net::UnixListener::from_fd(std::move(fd)); },
                                    raw_socket(AF_INET, SOCK_STREAM, true, true));
        CHECK(code == std::errc::invalid_argument);
        check_contains(text, "expected a listening Unix stream socket, found an IPv4 stream socket that is listening");
    }
    {
        FileDescriptor raw = raw_socket(AF_INET, SOCK_DGRAM, true, false);
        REQUIRE(::fcntl(raw.get(), F_SETFL, O_NONBLOCK) == 0);
        const int number = raw.get();
        auto sock = eddy::net::UdpSocket::from_fd(std::move(raw));
        CHECK(cloexec(number));
        CHECK_FALSE(nonblocking(number));  // blocking, as UdpSocket::bind's: io_uring waits
        auto peer = eddy::net::UdpSocket::bind(SocketAddr::loopback_v4(0));
        const std::string got = run(rt, [&]() -> Task<std::string> {
            co_await sock.send_to(eddy::test::bytes("hi"), peer.local_address());
            std::array<std::byte, 16> buf;
            auto r = co_await peer.recv_from(buf);
            co_return eddy::test::text(std::span(buf).first(r.size));
        }());
        CHECK(got == "hi");
        auto [code, text] = refusal([](FileDescriptor fd) { eddy::net::UdpSocket::from_fd(std::move(fd)); },
                                    raw_socket(AF_INET, SOCK_STREAM, true, false));
        CHECK(code == std::errc::invalid_argument);
        check_contains(text, "expected a UDP socket, found an IPv4 stream socket that is not listening");
    }
    {
        auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
        FileDescriptor raw(::socket(AF_INET, SOCK_STREAM, 0));
        const auto to = listener.local_address();
        REQUIRE(::connect(raw.get(), to.native(), to.native_size()) == 0);
        auto stream = TcpStream::from_fd(std::move(raw));
        CHECK(cloexec(stream.native_handle()));
        auto server = run(rt, listener.accept());
        CHECK(server.peer_address() == stream.local_address());
        auto [code, text] = refusal([](FileDescriptor fd) { TcpStream::from_fd(std::move(fd)); },
                                    raw_socket(AF_INET, SOCK_STREAM, true, true));
        CHECK(code == std::errc::invalid_argument);
        check_contains(text,
                       "expected a TCP socket that is not listening, found an IPv4 stream socket that is listening");
    }
}

namespace {

struct Env {
    Env(const char* pid, const char* fds, const char* names) {
        set("LISTEN_PID", pid);
        set("LISTEN_FDS", fds);
        set("LISTEN_FDNAMES", names);
    }
    ~Env() {
        set("LISTEN_PID", nullptr);
        set("LISTEN_FDS", nullptr);
        set("LISTEN_FDNAMES", nullptr);
    }
    Env(const Env&) = delete;
    Env& operator=(const Env&) = delete;
    static void set(const char* name, const char* value) {
        if (value != nullptr) ::setenv(name, value, 1);
        else ::unsetenv(name);
    }
};

std::string invalid(const char* pid, const char* fds, const char* names) {
    Env env(pid, fds, names);
    try {
        eddy::net::listen_fds();
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "no exception";
}

bool env_gone() {
    return std::getenv("LISTEN_PID") == nullptr && std::getenv("LISTEN_FDS") == nullptr &&
           std::getenv("LISTEN_FDNAMES") == nullptr;
}

}  // namespace

TEST_CASE("listen_fds: another process's variables, none, bad values") {
    const std::string me = std::to_string(::getpid());
    const std::string parent = std::to_string(::getppid());
    {
        Env env(parent.c_str(), "2", "a:b");
        CHECK(eddy::net::listen_fds().empty());  // meant for our parent
        CHECK(env_gone());                       // and removed all the same
    }
    {
        Env env(parent.c_str(), "1", nullptr);
        CHECK(eddy::net::listen_fds(false).empty());
        CHECK(std::getenv("LISTEN_PID") != nullptr);  // kept when asked to
    }
    {
        Env env(nullptr, "1", nullptr);
        CHECK(eddy::net::listen_fds().empty());
    }
    {
        Env env(me.c_str(), "0", nullptr);
        CHECK(eddy::net::listen_fds().empty());
    }
    check_contains(invalid("abc", "1", nullptr), "LISTEN_PID=\"abc\" is not a process id");
    check_contains(invalid("0", "1", nullptr), "LISTEN_PID=\"0\"");
    check_contains(invalid("", "1", nullptr), "LISTEN_PID=\"\"");
    for (const char* fds : {"x", "-1", "", "1x", "99999999999"})
        check_contains(invalid(me.c_str(), fds, nullptr),
                       ("LISTEN_FDS=\"" + std::string(fds) + "\" is not a count of descriptors").c_str());
    check_contains(invalid(me.c_str(), "1", "a:b"), "LISTEN_FDNAMES=\"a:b\" has 2 names for LISTEN_FDS=1");
    CHECK(env_gone());
}

namespace {

/// In a forked child: descriptors 3 and 4 become a TCP and a Unix listener, the variables
/// name them, listen_fds() returns them named, and both are adopted. The exit status says
/// which step failed (0: none).
int child_passes_two() {
    const int tcp = ::socket(AF_INET, SOCK_STREAM, 0);
    const auto a = SocketAddr::loopback_v4(0);
    if (tcp < 0 || ::bind(tcp, a.native(), a.native_size()) != 0 || ::listen(tcp, 4) != 0) return 10;
    FileDescriptor unix_fd = raw_socket(AF_UNIX, SOCK_STREAM, true, true);
    // Onto 3 and 4 (either may already be one of them: then it stays as it is).
    if (::dup2(tcp, 3) != 3) return 11;
    if (tcp != 3) ::close(tcp);
    const int unix_raw = unix_fd.release();
    if (unix_raw == 3 || ::dup2(unix_raw, 4) != 4) return 11;
    if (unix_raw != 4) ::close(unix_raw);
    Env::set("LISTEN_PID", std::to_string(::getpid()).c_str());
    Env::set("LISTEN_FDS", "2");
    Env::set("LISTEN_FDNAMES", "web:admin");
    auto fds = eddy::net::listen_fds();
    if (!env_gone()) return 12;
    if (fds.size() != 2 || fds[0].fd.get() != 3 || fds[1].fd.get() != 4) return 13;
    if (fds[0].name != "web" || fds[1].name != "admin") return 14;
    if (!cloexec(3) || !cloexec(4)) return 15;
    auto web = TcpListener::from_fd(std::move(fds[0].fd));
    auto admin = eddy::net::UnixListener::from_fd(std::move(fds[1].fd));
    // One announced descriptor that is not open: EBADF, and nothing taken.
    ::close(5);
    Env::set("LISTEN_PID", std::to_string(::getpid()).c_str());
    Env::set("LISTEN_FDS", "3");
    try {
        eddy::net::listen_fds();
        return 16;
    } catch (const std::system_error& e) {
        if (e.code() != std::errc::bad_file_descriptor) return 17;
        if (std::string(e.what()).find("LISTEN_FDS=3 but descriptor 5 is not open") == std::string::npos) return 18;
    }
    Env::set("LISTEN_PID", std::to_string(::getpid()).c_str());
    Env::set("LISTEN_FDS", "1");  // no names: "unknown"
    auto again = eddy::net::listen_fds();
    if (again.size() != 1 || again[0].name != "unknown") return 19;
    again[0].fd.release();  // web owns descriptor 3
    return web.local_address().port() != 0 ? 0 : 20;
}

}  // namespace

TEST_CASE("listen_fds in a child: two named sockets adopted; a descriptor not open is EBADF") {
    // No Runtime lives here, so this process has one thread and may fork.
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        int status = 30;
        try {
            status = child_passes_two();
        } catch (const std::exception& e) {
            std::fprintf(stderr, "child: %s\n", e.what());
        } catch (...) {
        }
        ::_exit(status);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("TcpSocket: options, SO_REUSEPORT, bind-before-connect, a refused connect") {
    Runtime rt(RuntimeConfig{.workers = 1});
    auto first = TcpSocket::v4();
    first.set_reuseport(true);
    first.set_reuseaddr(true);
    first.set_recv_buffer_size(64 * 1024);
    first.set_send_buffer_size(64 * 1024);
    CHECK(first.reuseport());
    CHECK(first.reuseaddr());
    CHECK(first.recv_buffer_size() >= 64 * 1024);
    CHECK(first.send_buffer_size() >= 64 * 1024);
    first.bind(SocketAddr::loopback_v4(0));
    const SocketAddr addr = first.local_address();
    auto second = TcpSocket::v4();
    second.set_reuseport(true);
    second.bind(addr);
    auto third = TcpSocket::v4();
    try {
        third.bind(addr);
        FAIL("no exception");
    } catch (const std::system_error& e) {
        CHECK(e.code() == std::errc::address_in_use);
        check_contains(e.what(), ("eddy::net::TcpSocket::bind(" + addr.to_string() + ")").c_str());
    }
    TcpListener one = std::move(first).listen(16);
    TcpListener two = std::move(second).listen(16);
    CHECK(nonblocking(one.native_handle()));
    CHECK(two.local_address() == addr);

    // Bind before connect: the server sees the port the client chose.
    auto target = TcpListener::bind(SocketAddr::loopback_v4(0));
    std::optional<Task<TcpStream>> connecting;
    std::uint16_t chosen = 0;
    {
        auto chooser = TcpSocket::v4();
        chooser.set_nodelay(true);
        chooser.bind(SocketAddr::loopback_v4(0));
        chosen = chooser.local_address().port();
        connecting.emplace(std::move(chooser).connect(target.local_address()));  // taken now: chooser may go
    }
    const auto [client, peer] = run(rt, [&]() -> Task<std::pair<TcpStream, SocketAddr>> {
        TcpStream c = co_await std::move(*connecting);
        auto accepted = co_await target.accept_with_address();
        co_return std::pair{std::move(c), accepted.second};
    }());
    CHECK(peer.port() == chosen);
    CHECK(client.local_address().port() == chosen);
    CHECK(client.nodelay());

    // A port nobody listens on (a listener bound and dropped).
    SocketAddr gone = TcpListener::bind(SocketAddr::loopback_v4(0)).local_address();
    const auto refused = run(rt, [&]() -> Task<std::string> {
        try {
            co_await TcpSocket::v4().connect(gone);
        } catch (const std::system_error& e) {
            co_return std::string(e.code() == std::errc::connection_refused ? "refused: " : "other: ") + e.what();
        }
        co_return "connected";
    }());
    check_contains(refused, ("refused: eddy::net::TcpSocket::connect(" + gone.to_string() + ")").c_str());
}

TEST_CASE("TcpSocket::set_only_v6 decides whether an IPv6 listener takes IPv4 clients") {
    if (!eddy::test::ipv6_loopback_available()) {
        MESSAGE("no IPv6 here: skipped");
        return;
    }
    Runtime rt(RuntimeConfig{.workers = 1});
    auto v4_client_to = [&](bool only) {
        auto s = TcpSocket::for_address(SocketAddr::any_v6(0));
        s.set_only_v6(only);
        CHECK(s.only_v6() == only);
        s.bind(SocketAddr::any_v6(0));
        const TcpListener l = std::move(s).listen();
        return run(rt, eddy::test::error_of(TcpStream::connect(SocketAddr::loopback_v4(l.local_address().port()))));
    };
    CHECK(!v4_client_to(false));                                 // mapped: ::ffff:127.0.0.1
    CHECK(v4_client_to(true) == std::errc::connection_refused);  // IPv6 only
}
