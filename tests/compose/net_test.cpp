// tests/compose/net_test.cpp: the socket operations (TcpStream, TcpListener, UdpSocket,
// UnixStream, UnixListener, UnixDatagram) under every combinator (tests/compose/compose.hpp).
// A read's blocking form waits on a quiet peer, a write's on kernel buffers filled to the
// brim, an accept's on an empty backlog. The recheck proves the cancelled operation moved no
// byte, datagram or connection: what arrives after it goes to the next operation, whole.
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <eddy/eddy.hpp>

#include "compose/compose.hpp"

using eddy::Task;
using eddy::net::SocketAddr;
using eddy::net::TcpListener;
using eddy::net::TcpStream;
using eddy::net::UnixStream;
using eddy::test::bytes;
using eddy::test::text;
using eddy::test::compose::check_all;
using namespace std::chrono_literals;

namespace {

Task<std::pair<TcpStream, TcpStream>> tcp_pair() {
    auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    eddy::test::Connection c = co_await eddy::test::connect_pair(listener);
    // No Nagle: a small write reaches the peer inside the write call, which the paused clock
    // relies on (see tls_test.cpp).
    c.client.set_nodelay(true);
    c.server.set_nodelay(true);
    co_return std::pair<TcpStream, TcpStream>(std::move(c.client), std::move(c.server));
}
Task<std::pair<UnixStream, UnixStream>> unix_pair() { co_return UnixStream::pair(); }

/// Both ends of a stream: the test writes at `writer` and the operations read at `reader`,
/// or the reverse for the write fixtures.
template <class S, auto MakePair>
struct Ends {
    std::optional<S> writer, reader;
    Task<void> setup() {
        auto [w, r] = co_await MakePair();
        writer.emplace(std::move(w));
        reader.emplace(std::move(r));
    }
};

template <class S, auto MakePair>
struct StreamRead : Ends<S, MakePair> {
    std::array<std::byte, 64> buf{};
    Task<void> arm() { co_await this->writer->write_all("abc"); }
    auto completing() { return this->reader->read(buf); }
    void check(std::size_t n) { COMPOSE_CHECK(text(std::span(buf).first(n)) == "abc"); }
    auto blocking() { return this->reader->read(buf); }
    Task<void> recheck() {
        co_await this->writer->write_all("late");  // after the read gave up: all of it is still there
        const std::size_t n = co_await this->reader->read(buf);
        COMPOSE_CHECK(text(std::span(buf).first(n)) == "late");
    }
};
TEST_CASE("net: TcpStream::read") { check_all<StreamRead<TcpStream, tcp_pair>>(); }
TEST_CASE("net: UnixStream::read") { check_all<StreamRead<UnixStream, unix_pair>>(); }

/// The write fixtures' ends: the operations write "hello" at `writer`; arm() reads back what
/// the completed ones wrote; hold() fills the kernel's buffers until a write would wait;
/// recheck() reads exactly what the fill wrote and finds nothing after it.
template <class S, auto MakePair>
struct FullEnds : Ends<S, MakePair> {
    std::size_t filled = 0;
    int written = 0;  // completed writes not read back yet
    Task<void> setup() {
        co_await Ends<S, MakePair>::setup();
        // A small send buffer keeps the fill small. (Not a small receive buffer: TCP then
        // reopens its window by the persist timer only, in seconds.)
        eddy::test::set_int_sockopt(this->writer->native_handle(), SOL_SOCKET, SO_SNDBUF, 4096);
    }
    Task<void> arm() {
        for (; written > 0; --written) {
            std::array<std::byte, 5> got{};
            co_await eddy::io::read_exact(*this->reader, got);
            COMPOSE_CHECK(text(got) == "hello");
        }
    }
    void check(std::size_t n) {
        COMPOSE_CHECK(n == 5);
        ++written;
    }
    Task<void> hold() {
        co_await arm();
        std::vector<char> chunk(16384, 'f');
        for (;;) {
            const ssize_t n =
                ::send(this->writer->native_handle(), chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n < 0 && errno == EAGAIN) break;
            if (n < 0) throw std::system_error(errno, std::system_category(), "send");
            filled += static_cast<std::size_t>(n);
        }
    }
    Task<void> recheck() {
        std::vector<std::byte> all(filled);
        co_await eddy::io::read_exact(*this->reader, all);
        COMPOSE_CHECK(std::count(all.begin(), all.end(), std::byte{'f'}) == static_cast<std::ptrdiff_t>(filled));
        char extra;  // the cancelled write sent nothing
        COMPOSE_CHECK(::recv(this->reader->native_handle(), &extra, 1, MSG_DONTWAIT) < 0);
        filled = 0;
        co_await hold();
    }
};

template <class S, auto MakePair>
struct StreamWrite : FullEnds<S, MakePair> {
    auto completing() { return this->writer->write(bytes("hello")); }
    auto blocking() { return this->writer->write(bytes("hello")); }
};
TEST_CASE("net: TcpStream::write") { check_all<StreamWrite<TcpStream, tcp_pair>>(); }
TEST_CASE("net: UnixStream::write") { check_all<StreamWrite<UnixStream, unix_pair>>(); }

template <class S, auto MakePair>
struct StreamWriteAll : FullEnds<S, MakePair> {
    auto completing() { return this->writer->write_all("hello"); }
    auto blocking() { return this->writer->write_all("hello"); }
};
TEST_CASE("net: TcpStream::write_all") { check_all<StreamWriteAll<TcpStream, tcp_pair>>(); }
TEST_CASE("net: UnixStream::write_all") { check_all<StreamWriteAll<UnixStream, unix_pair>>(); }

std::array<char, 5> hello = {'h', 'e', 'l', 'l', 'o'};
std::array<iovec, 2> hello_iov = {iovec{hello.data(), 2}, iovec{hello.data() + 2, 3}};

struct TcpWriteVectored : FullEnds<TcpStream, tcp_pair> {
    auto completing() { return writer->write_vectored(hello_iov); }
    auto blocking() { return writer->write_vectored(hello_iov); }
};
TEST_CASE("net: TcpStream::write_vectored") { check_all<TcpWriteVectored>(); }

struct TcpReadVectored : Ends<TcpStream, tcp_pair> {
    std::array<char, 3> a{}, b{};
    std::array<iovec, 2> iov = {iovec{a.data(), a.size()}, iovec{b.data(), b.size()}};
    Task<void> arm() { co_await writer->write_all("abcdef"); }
    auto completing() { return reader->read_vectored(iov); }
    void check(std::size_t n) {
        COMPOSE_CHECK((n == 6 && std::string(a.data(), 3) + std::string(b.data(), 3) == "abcdef"));
    }
    auto blocking() { return reader->read_vectored(iov); }
    Task<void> recheck() {
        co_await writer->write_all("xy");
        const std::size_t n = co_await reader->read_vectored(iov);
        COMPOSE_CHECK((n == 2 && std::string(a.data(), 2) == "xy"));
    }
};
TEST_CASE("net: TcpStream::read_vectored") { check_all<TcpReadVectored>(); }

struct TcpReadExact : Ends<TcpStream, tcp_pair> {
    std::array<std::byte, 4> buf{};
    Task<void> arm() { co_await writer->write_all("abcd"); }
    auto completing() { return reader->read_exact(buf); }
    void check(std::monostate) { COMPOSE_CHECK(text(buf) == "abcd"); }
    auto blocking() { return reader->read_exact(buf); }
    Task<void> recheck() {
        co_await writer->write_all("wxyz");
        co_await reader->read_exact(buf);
        COMPOSE_CHECK(text(buf) == "wxyz");
    }
};
TEST_CASE("net: TcpStream::read_exact") { check_all<TcpReadExact>(); }

struct TcpAccept {
    TcpListener listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    std::vector<TcpStream> clients;  // connected, waiting in the backlog until accepted
    Task<void> arm() { clients.push_back(co_await TcpStream::connect(listener.local_address())); }
    auto completing() { return listener.accept(); }
    void check(TcpStream s) { COMPOSE_CHECK(s.peer_address() == clients.back().local_address()); }
    auto blocking() { return listener.accept(); }
    Task<void> recheck() {
        co_await arm();  // connected after the accept gave up: the next accept takes it
        check(co_await listener.accept());
    }
};
TEST_CASE("net: TcpListener::accept") { check_all<TcpAccept>(); }

// No blocking form: a connect to a listener completes from the backlog at once.
struct TcpConnect {
    TcpListener listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    auto completing() { return TcpStream::connect(listener.local_address()); }
    void check(TcpStream s) { COMPOSE_CHECK(s.peer_address() == listener.local_address()); }
};
TEST_CASE("net: TcpStream::connect") { check_all<TcpConnect>(); }

struct UdpRecvFrom {
    eddy::net::UdpSocket a = eddy::net::UdpSocket::bind(SocketAddr::loopback_v4(0));
    eddy::net::UdpSocket b = eddy::net::UdpSocket::bind(SocketAddr::loopback_v4(0));
    std::array<std::byte, 64> buf{};
    Task<void> arm() { co_await b.send_to(bytes("abc"), a.local_address()); }
    auto completing() { return a.recv_from(buf); }
    void check(eddy::net::UdpSocket::Received r) {
        COMPOSE_CHECK((text(std::span(buf).first(r.size)) == "abc" && r.from == b.local_address()));
    }
    auto blocking() { return a.recv_from(buf); }
    Task<void> recheck() {
        co_await b.send_to(bytes("late"), a.local_address());
        const auto r = co_await a.recv_from(buf);
        COMPOSE_CHECK(text(std::span(buf).first(r.size)) == "late");
    }
};
TEST_CASE("net: UdpSocket::recv_from") { check_all<UdpRecvFrom>(); }

// No blocking form: a datagram send does not wait for the receiver.
struct UdpSendTo {
    eddy::net::UdpSocket a = eddy::net::UdpSocket::bind(SocketAddr::loopback_v4(0));
    eddy::net::UdpSocket b = eddy::net::UdpSocket::bind(SocketAddr::loopback_v4(0));
    auto completing() { return b.send_to(bytes("abc"), a.local_address()); }
    void check(std::size_t n) { COMPOSE_CHECK(n == 3); }
};
TEST_CASE("net: UdpSocket::send_to") { check_all<UdpSendTo>(); }

struct UnixDatagramRecv {
    std::optional<eddy::net::UnixDatagram> a, b;
    std::array<std::byte, 64> buf{};
    UnixDatagramRecv() {
        auto [x, y] = eddy::net::UnixDatagram::pair();
        a.emplace(std::move(x));
        b.emplace(std::move(y));
    }
    Task<void> arm() { co_await b->send(bytes("abc")); }
    auto completing() { return a->recv_from(buf); }
    void check(eddy::net::UnixDatagram::Received r) { COMPOSE_CHECK(text(std::span(buf).first(r.size)) == "abc"); }
    auto blocking() { return a->recv_from(buf); }
    Task<void> recheck() {
        co_await b->send(bytes("late"));
        const auto r = co_await a->recv_from(buf);
        COMPOSE_CHECK(text(std::span(buf).first(r.size)) == "late");
    }
};
TEST_CASE("net: UnixDatagram::recv_from") { check_all<UnixDatagramRecv>(); }

struct UnixListenerAccept {
    eddy::test::TempDir dir;
    eddy::net::UnixAddr addr = eddy::net::UnixAddr::path(dir.file("sock"));
    eddy::net::UnixListener listener = eddy::net::UnixListener::bind(addr);
    std::vector<UnixStream> clients;
    Task<void> arm() { clients.push_back(co_await UnixStream::connect(addr)); }
    auto completing() { return listener.accept(); }
    void check(UnixStream s) {
        // The accepted end is the newest client's peer: a byte crosses.
        COMPOSE_CHECK(::send(s.native_handle(), "k", 1, MSG_NOSIGNAL) == 1);
        char got = 0;
        COMPOSE_CHECK((::recv(clients.back().native_handle(), &got, 1, MSG_DONTWAIT) == 1 && got == 'k'));
    }
    auto blocking() { return listener.accept(); }
    Task<void> recheck() {
        co_await arm();
        check(co_await listener.accept());
    }
};
TEST_CASE("net: UnixListener::accept") { check_all<UnixListenerAccept>(); }

}  // namespace
