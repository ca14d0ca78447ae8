// tests/reactor/cross_runtime_test.cpp: a socket used by tasks of several runtimes (io/
// poll_state.hpp, "Runtimes"). Its poll state is bound to the runtime where it first had to
// wait; after that runtime is destroyed a wait from another one rebinds it there; a task of
// another runtime waiting on it while the bound one lives resumes on its own runtime (and
// its with_timeout fires there); destroying the bound runtime while such a task waits wakes
// the task on its own runtime, which then waits there. The race rounds are for the ASan and
// TSan builds. (Pipes need none of this: each pipe read is an operation of its own.)
//
// State shared with tasks is declared before the runtimes, so it outlives them.
#include <doctest/doctest.h>

#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include <eddy/io/file_descriptor.hpp>
#include <eddy/time/with_timeout.hpp>
#include <eddy/net/unix_addr.hpp>
#include <eddy/net/unix_listener.hpp>
#include <eddy/net/unix_stream.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/metrics.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/waiting.hpp"

using eddy::JoinHandle;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::net::UnixStream;
using namespace std::chrono_literals;

namespace {

RuntimeConfig named(const char* prefix) { return RuntimeConfig{.workers = 1, .thread_name_prefix = prefix}; }

bool on(const char* prefix) {
    char buf[16] = {};
    pthread_getname_np(pthread_self(), buf, sizeof buf);
    return std::string(buf).rfind(prefix, 0) == 0;
}

/// Waits (bounded) until `rt`'s reactor holds `n` socket polls: the socket waited there.
bool polled(Runtime& rt, std::size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + eddy::test::kDeadline;
    while (rt.metrics().reactor.sockets_polled != n) {
        if (eddy::test::past(deadline)) return false;
        std::this_thread::yield();
    }
    return true;
}

/// A connected pair: a UnixStream for the tasks, and a raw descriptor the test writes to.
struct Pair {
    std::optional<UnixStream> mine;
    int peer = -1;
    Pair() {
        int fds[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0);
        mine.emplace(eddy::io::FileDescriptor(fds[0]));
        peer = fds[1];
    }
    ~Pair() { ::close(peer); }
    Pair(const Pair&) = delete;
    Pair& operator=(const Pair&) = delete;
};

void put(int fd, char c) { REQUIRE(::write(fd, &c, 1) == 1); }

struct Read {
    char byte = 0;
    bool on_b = false;  // resumed on a thread of runtime "xsB"
};

/// One byte from `s`; where it resumed.
Task<Read> read_one(UnixStream& s, std::atomic<int>* started = nullptr) {
    if (started != nullptr) started->fetch_add(1);
    std::byte b{};
    const std::size_t n = co_await s.read(std::span<std::byte>(&b, 1));
    REQUIRE(n == 1);
    co_return Read{static_cast<char>(b), on("xsB")};
}

/// Lets a task that just started reach its wait (most runs; correct either way).
void settle() {
    for (int i = 0; i < 200; ++i) std::this_thread::yield();
}

template <class T>
T await_on(Runtime& rt, JoinHandle<T> h) {
    return rt.block_on([](JoinHandle<T> handle) -> Task<T> { co_return co_await std::move(handle); }(std::move(h)));
}

/// Binds `mine` to `rt`: a read that has to wait there (its poll armed), then its byte.
void bind_to(Runtime& rt, UnixStream& mine, int peer, char c) {
    auto first = rt.spawn(read_one(mine));
    REQUIRE(polled(rt, 1));
    put(peer, c);
    CHECK(await_on(rt, std::move(first)).byte == c);
}

/// A pair whose stream is bound to runtime `a` ("xsA", which a test may end): `mine`
/// waited there once and its poll stays armed in a's ring.
struct BoundToA {
    Pair p;
    UnixStream& mine = *p.mine;
    const int peer = p.peer;
    std::optional<Runtime> a{std::in_place, named("xsA")};
    BoundToA() { bind_to(*a, mine, peer, '1'); }
};

}  // namespace

TEST_CASE("a socket that waited on a destroyed runtime waits on the next one") {
    Pair p;
    UnixStream& mine = *p.mine;
    const int peer = p.peer;
    std::optional<Runtime> a(std::in_place, named("xsA"));
    bind_to(*a, mine, peer, 'a');
    a.reset();

    Runtime b(named("xsB"));
    auto second = b.spawn(read_one(mine));
    REQUIRE(polled(b, 1));  // rebound: the poll is armed in b's ring now
    put(peer, 'b');
    const Read r = await_on(b, std::move(second));
    CHECK(r.byte == 'b');
    CHECK(r.on_b);
}

TEST_CASE("a listener that waited on a destroyed runtime accepts on the next one") {
    const auto addr = eddy::net::UnixAddr::abstract("eddy-cross-runtime-" + std::to_string(::getpid()));
    auto listener = eddy::net::UnixListener::bind(addr);
    auto accept_one = [](eddy::net::UnixListener& l) -> Task<bool> {
        UnixStream s = co_await l.accept();
        (void)s;
        co_return true;
    };
    auto connect_one = [](eddy::net::UnixAddr address) -> Task<bool> {
        UnixStream s = co_await UnixStream::connect(address);
        (void)s;
        co_return true;
    };
    std::optional<Runtime> a(std::in_place, named("xsA"));
    auto first = a->spawn(accept_one(listener));
    REQUIRE(polled(*a, 1));
    CHECK(a->block_on(connect_one(addr)));
    CHECK(await_on(*a, std::move(first)));
    a.reset();

    Runtime b(named("xsB"));
    auto second = b.spawn(accept_one(listener));
    REQUIRE(polled(b, 1));
    CHECK(b.block_on(connect_one(addr)));
    CHECK(await_on(b, std::move(second)));
}

TEST_CASE("a task of another runtime waiting on a bound socket resumes on its own runtime") {
    BoundToA bound;
    UnixStream& mine = bound.mine;
    const int peer = bound.peer;
    Runtime b(named("xsB"));

    std::atomic<int> started{0};
    auto second = b.spawn(read_one(mine, &started));
    while (started.load() == 0) std::this_thread::yield();
    settle();
    put(peer, '2');
    const Read r = await_on(b, std::move(second));
    CHECK(r.byte == '2');
    CHECK(r.on_b);
    CHECK(b.metrics().reactor.sockets_polled == 0);  // it waited behind a's poll
}

TEST_CASE("with_timeout in another runtime fires around a read of a bound socket") {
    BoundToA bound;
    Runtime b(named("xsB"));
    UnixStream& mine = bound.mine;
    auto timed = [](UnixStream& s) -> Task<bool> {
        try {
            (void)co_await eddy::with_timeout(read_one(s), 20ms);
        } catch (const eddy::TimedOut&) {
            co_return on("xsB");
        }
        co_return false;
    };
    SUBCASE("the bound runtime alive") { CHECK(b.block_on(timed(mine))); }
    SUBCASE("the bound runtime destroyed") {
        bound.a.reset();
        CHECK(b.block_on(timed(mine)));
    }
}

TEST_CASE("destroying the bound runtime wakes a waiter of another runtime, which waits on") {
    BoundToA bound;
    UnixStream& mine = bound.mine;
    const int peer = bound.peer;
    std::optional<Runtime>& a = bound.a;

    Runtime b(named("xsB"));
    std::atomic<int> started{0};
    auto second = b.spawn([](UnixStream& s, std::atomic<int>& starts) -> Task<Read> {
        // Bounded, so that a lost waiter fails the test instead of hanging it.
        co_return co_await eddy::with_timeout(read_one(s, &starts), eddy::test::kDeadline);
    }(mine, started));
    while (started.load() == 0) std::this_thread::yield();
    settle();
    SUBCASE("shutdown") { a->shutdown(); }
    SUBCASE("destruction") { a.reset(); }
    REQUIRE(polled(b, 1));  // woken on b, it rebound the socket and waits there
    put(peer, '2');
    const Read r = await_on(b, std::move(second));
    CHECK(r.byte == '2');
    CHECK(r.on_b);
}

// Rounds of a socket read by tasks of two runtimes, one of which ends while bytes arrive.
// Every read ends (a byte, or its runtime destroyed it); nothing is touched after free.
TEST_CASE("a socket shared by two runtimes survives either ending at any moment") {
    constexpr int kRounds = 300;
    std::atomic<int> got{0};
    auto reader = [](UnixStream& s, std::atomic<int>& reads) -> Task<void> {
        std::byte b{};
        try {
            if (co_await s.read(std::span<std::byte>(&b, 1)) == 1) reads.fetch_add(1);
        } catch (const std::system_error&) {
        }
    };
    int put_bytes = 0;
    for (int i = 0; i < kRounds; ++i) {
        Pair p;
        UnixStream& mine = *p.mine;
        const int peer = p.peer;
        std::optional<Runtime> a(std::in_place, named("xsA"));
        std::optional<Runtime> b(std::in_place, named("xsB"));
        a->spawn(reader(mine, got)).detach();
        b->spawn(reader(mine, got)).detach();
        for (int k = 0; k < i % 4; ++k) std::this_thread::yield();
        if (i % 3 != 0) {
            put(peer, 'x');
            ++put_bytes;
        }
        if (i % 2 == 0) {
            a.reset();
        } else {
            b.reset();
        }
        if (i % 3 == 1) {
            put(peer, 'y');
            ++put_bytes;
        }
        a.reset();
        b.reset();
    }
    CHECK(got.load() <= put_bytes);
}
