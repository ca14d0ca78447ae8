// tests/reactor/io_shutdown_test.cpp: shutting a runtime down (Runtime::shutdown or ~Runtime)
// while tasks are blocked in the reactor: pipe reads and writes, socket accepts and reads,
// long sleeps, and a constant stream of completing operations.
//
// Each case checks that shutdown returns promptly (the kernel gives the buffers back when
// asked), that no blocked task is resumed, that every frame is destroyed (each task owns a
// Counted and a heap buffer: the counter proves the frames went, LeakSanitizer in the ASan
// build proves the buffers did), and that a JoinHandle of such a task throws RuntimeStopped.
//
// Before shutting down, the test waits (bounded) until every task has announced it is about
// to await, then gives the operations ~50 ms to reach the kernel. That pause only makes the
// interesting path (operations held by the kernel) likely; every assertion holds either way.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <eddy/io/file_descriptor.hpp>
#include <eddy/io/pipe.hpp>
#include <eddy/io/read_write.hpp>
#include <eddy/time/sleep.hpp>
#include <eddy/net/socket_addr.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/net/tcp_stream.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/counted.hpp"
#include "support/io_helpers.hpp"
#include "support/waiting.hpp"

using eddy::JoinHandle;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::test::Counted;
using eddy::test::LifetimeCounter;
using eddy::test::Outcome;
using eddy::test::wait_count;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

constexpr auto kPrompt = 5s;  // "returns promptly": generous, a hang is what it catches

struct Flags {
    std::atomic<int> reached{0};  // about to await
    std::atomic<int> resumed{0};  // came back from the await (must stay 0 for blocked tasks)
};

Task<void> pipe_reader(Counted c, int fd, Flags& f) {
    (void)c;
    auto buf = std::make_unique<std::byte[]>(4096);  // the kernel holds this one
    f.reached.fetch_add(1);
    (void)co_await eddy::io::read(fd, std::span(buf.get(), 4096));
    f.resumed.fetch_add(1);
}

Task<void> pipe_writer(Counted c, int fd, Flags& f) {
    (void)c;
    std::vector<std::byte> data(65536, std::byte{'w'});  // more than a full pipe takes
    f.reached.fetch_add(1);
    co_await eddy::test::write_all(fd, data);
    f.resumed.fetch_add(1);
}

Task<void> acceptor(Counted c, eddy::net::TcpListener& l, Flags& f) {
    (void)c;
    f.reached.fetch_add(1);
    eddy::net::TcpStream s = co_await l.accept();
    f.resumed.fetch_add(1);
}

/// Accepts one connection (made by the test thread), then reads from it forever.
Task<void> socket_reader(Counted c, eddy::net::TcpListener& l, Flags& f) {
    (void)c;
    eddy::net::TcpStream s = co_await l.accept();
    auto buf = std::make_unique<std::byte[]>(4096);
    f.reached.fetch_add(1);
    (void)co_await s.read(std::span(buf.get(), 4096));
    f.resumed.fetch_add(1);
}

Task<void> sleeper(Counted c, std::chrono::seconds d, Flags& f) {
    (void)c;
    auto owned = std::make_unique<std::string>(1000, 's');  // something for LeakSanitizer to see
    f.reached.fetch_add(1);
    co_await eddy::sleep(d);
    f.resumed.fetch_add(1);
}

/// A plain blocking TCP connection to `addr` from this thread.
eddy::io::FileDescriptor connect_blocking(const eddy::net::SocketAddr& addr) {
    eddy::io::FileDescriptor fd(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
    REQUIRE(fd);
    REQUIRE(::connect(fd.get(), addr.native(), addr.native_size()) == 0);
    return fd;
}

/// Fills a blocking pipe to the brim without blocking this thread.
void fill_pipe(int fd) {
    const int flags = ::fcntl(fd, F_GETFL);
    REQUIRE(::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0);
    char chunk[4096] = {};
    while (::write(fd, chunk, sizeof chunk) > 0) {
    }
    REQUIRE(::fcntl(fd, F_SETFL, flags) == 0);
}

/// Everything a "blocked runtime" scenario holds; the runtime itself is separate, so a test
/// can shut it down or destroy it.
struct Scene {
    static constexpr int kPipeReaders = 8;
    static constexpr int kSleepers = 1000;
    std::vector<eddy::io::Pipe> read_pipes;
    eddy::io::Pipe full_pipe;
    eddy::net::TcpListener accept_listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
    eddy::net::TcpListener read_listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4(0));
    eddy::io::FileDescriptor client;
    std::vector<JoinHandle<void>> handles;

    int tasks() const { return kPipeReaders + 1 + 1 + 1 + kSleepers; }

    /// Starts every blocked task on `rt` and waits until each is about to await.
    void start(Runtime& rt, LifetimeCounter& counter, Flags& f) {
        for (int i = 0; i < kPipeReaders; ++i) read_pipes.push_back(eddy::io::pipe());
        full_pipe = eddy::io::pipe();
        fill_pipe(full_pipe.write_end.get());
        for (int i = 0; i < kPipeReaders; ++i)
            handles.push_back(rt.spawn(pipe_reader(Counted(counter, i), read_pipes[i].read_end.get(), f)));
        handles.push_back(rt.spawn(pipe_writer(Counted(counter), full_pipe.write_end.get(), f)));
        handles.push_back(rt.spawn(acceptor(Counted(counter), accept_listener, f)));
        handles.push_back(rt.spawn(socket_reader(Counted(counter), read_listener, f)));
        client = connect_blocking(read_listener.local_address());
        for (int i = 0; i < kSleepers; ++i) handles.push_back(rt.spawn(sleeper(Counted(counter, i), 10s, f)));
        REQUIRE(wait_count(f.reached, tasks()));
        std::this_thread::sleep_for(50ms);  // see the file comment
    }

    /// After the runtime is gone: every handle reports RuntimeStopped (awaited on `other`).
    int stopped_handles(Runtime& other) {
        int stopped = 0;
        for (auto& h : handles) {
            CHECK(h.is_finished());
            stopped += other.block_on(eddy::test::join_outcome(std::move(h))) == Outcome::runtime_stopped ? 1 : 0;
        }
        return stopped;
    }

    /// The descriptors the dead tasks were blocked on work normally: the kernel no longer
    /// holds a read on them (it would swallow the byte).
    void check_descriptors_released() {
        for (auto& p : read_pipes) {
            const char x = 'x';
            REQUIRE(::write(p.write_end.get(), &x, 1) == 1);
            char got = 0;
            CHECK(::read(p.read_end.get(), &got, 1) == 1);
            CHECK(got == 'x');
        }
    }
};

}  // namespace

TEST_SUITE("reactor/io_shutdown") {

TEST_CASE("shutdown with reads, writes, accepts and long sleeps in flight returns promptly") {
    LifetimeCounter counter;
    Flags f;
    Scene scene;
    Runtime other(RuntimeConfig{.workers = 1});
    {
        Runtime rt(RuntimeConfig{.workers = 2});
        scene.start(rt, counter, f);
        CHECK(counter.alive() == scene.tasks());
        const auto start = Clock::now();
        rt.shutdown();
        CHECK(Clock::now() - start < kPrompt);
        CHECK(f.resumed.load() == 0);
        CHECK(counter.alive() == 0);
        CHECK(scene.stopped_handles(other) == scene.tasks());
    }
    scene.check_descriptors_released();
}

TEST_CASE("destroying the runtime with operations in flight returns promptly") {
    LifetimeCounter counter;
    Flags f;
    Scene scene;
    Runtime other(RuntimeConfig{.workers = 1});
    auto rt = std::make_unique<Runtime>(RuntimeConfig{.workers = 2});
    scene.start(*rt, counter, f);
    const auto start = Clock::now();
    rt.reset();
    CHECK(Clock::now() - start < kPrompt);
    CHECK(f.resumed.load() == 0);
    CHECK(counter.alive() == 0);
    CHECK(scene.stopped_handles(other) == scene.tasks());
    scene.check_descriptors_released();
}

TEST_CASE("a tiny ring shuts down with more operations in flight than it has entries") {
    LifetimeCounter counter;
    Flags f;
    Scene scene;
    Runtime other(RuntimeConfig{.workers = 1});
    {
        Runtime rt(RuntimeConfig{.workers = 2, .ring_entries = 2});
        scene.start(rt, counter, f);
        const auto start = Clock::now();
        rt.shutdown();
        CHECK(Clock::now() - start < kPrompt);
    }
    CHECK(f.resumed.load() == 0);
    CHECK(counter.alive() == 0);
    CHECK(scene.stopped_handles(other) == scene.tasks());
    scene.check_descriptors_released();
}

TEST_CASE("shutdown while operations complete all the time") {
    // Pairs of tasks pass a byte back and forth forever; shutdown comes in the middle of it.
    constexpr int kPairs = 50;
    LifetimeCounter counter;
    std::atomic<int> exchanges{0};
    std::vector<eddy::io::Pipe> ab;
    std::vector<eddy::io::Pipe> ba;
    for (int i = 0; i < kPairs; ++i) {
        ab.push_back(eddy::io::pipe());
        ba.push_back(eddy::io::pipe());
    }
    Runtime other(RuntimeConfig{.workers = 1});
    std::vector<JoinHandle<void>> handles;
    {
        Runtime rt(RuntimeConfig{.workers = 2, .ring_entries = 8});
        auto bouncer = [](Counted c, int in, int out, bool starts, std::atomic<int>& n) -> Task<void> {
            (void)c;
            std::byte b{1};
            if (starts) co_await eddy::test::write_all(out, std::span<const std::byte>(&b, 1));
            for (;;) {
                (void)co_await eddy::io::read(in, std::span(&b, 1));
                n.fetch_add(1);
                co_await eddy::test::write_all(out, std::span<const std::byte>(&b, 1));
            }
        };
        for (int i = 0; i < kPairs; ++i) {
            handles.push_back(
                rt.spawn(bouncer(Counted(counter), ba[i].read_end.get(), ab[i].write_end.get(), true, exchanges)));
            handles.push_back(
                rt.spawn(bouncer(Counted(counter), ab[i].read_end.get(), ba[i].write_end.get(), false, exchanges)));
        }
        REQUIRE(wait_count(exchanges, 10'000));  // in full swing
        const auto start = Clock::now();
        rt.shutdown();
        CHECK(Clock::now() - start < kPrompt);
    }
    CHECK(counter.alive() == 0);
    int stopped = 0;
    for (auto& h : handles)
        stopped += other.block_on(eddy::test::join_outcome(std::move(h))) == Outcome::runtime_stopped ? 1 : 0;
    CHECK(stopped == 2 * kPairs);
}

TEST_CASE("stop requests racing with shutdown are harmless") {
    constexpr int kReaders = 64;
    LifetimeCounter counter;
    std::vector<eddy::io::Pipe> pipes;
    for (int i = 0; i < kReaders; ++i) pipes.push_back(eddy::io::pipe());
    std::vector<std::stop_source> sources(kReaders);
    std::atomic<int> reached{0};
    Runtime other(RuntimeConfig{.workers = 1});
    std::vector<JoinHandle<Outcome>> handles;
    {
        Runtime rt(RuntimeConfig{.workers = 2});
        for (int i = 0; i < kReaders; ++i)
            handles.push_back(
                rt.spawn([](Counted c, int fd, std::stop_token tok, std::atomic<int>& r) -> Task<Outcome> {
                    (void)c;
                    auto buf = std::make_unique<std::byte[]>(256);
                    r.fetch_add(1);
                    co_return co_await eddy::test::outcome_of(
                        [](int fd_, std::span<std::byte> b, std::stop_token t) -> Task<std::size_t> {
                            co_return co_await eddy::io::read(fd_, b, std::move(t));
                        }(fd, std::span(buf.get(), 256), std::move(tok)));
                }(Counted(counter, i), pipes[i].read_end.get(), sources[i].get_token(), reached)));
        REQUIRE(wait_count(reached, kReaders));
        // A quarter are cancelled (and finish) before shutdown; the rest while it runs.
        for (int i = 0; i < kReaders / 4; ++i) sources[i].request_stop();
        for (int i = 0; i < kReaders / 4; ++i) REQUIRE(eddy::test::wait_finished(handles[i]));
        std::atomic<bool> go{false};
        std::thread stopper([&] {
            while (!go.load()) std::this_thread::yield();
            for (int i = kReaders / 4; i < kReaders; ++i) sources[i].request_stop();
        });
        go.store(true);
        const auto start = Clock::now();
        rt.shutdown();
        CHECK(Clock::now() - start < kPrompt);
        stopper.join();
    }
    // Only the finished tasks' frames remain (their handles hold them, with the result).
    CHECK(counter.alive() <= kReaders);
    // Each task either finished with its read cancelled (the stop came first) or was destroyed.
    int canceled = 0;
    int stopped = 0;
    for (auto& h : handles) {
        Outcome inner = Outcome::other_exception;
        const Outcome outer = other.block_on([](JoinHandle<Outcome> h_, Outcome& in) -> Task<Outcome> {
            try {
                in = co_await std::move(h_);
            } catch (const eddy::RuntimeStopped&) {
                co_return Outcome::runtime_stopped;
            }
            co_return Outcome::value;
        }(std::move(h), inner));
        if (outer == Outcome::runtime_stopped) ++stopped;
        else if (outer == Outcome::value && inner == Outcome::canceled) ++canceled;
    }
    CHECK(canceled + stopped == kReaders);
    CHECK(canceled >= kReaders / 4);
    CHECK(counter.alive() == 0);  // every frame is gone once its handle is
    MESSAGE(canceled << " cancelled before shutdown, " << stopped << " destroyed by it");
}

TEST_CASE("runtimes with blocked operations can be created and destroyed repeatedly") {
    LifetimeCounter counter;
    auto p = eddy::io::pipe();
    for (int i = 0; i < 20; ++i) {
        Flags f;
        Runtime rt(RuntimeConfig{.workers = 1 + static_cast<std::size_t>(i % 2)});
        rt.spawn(pipe_reader(Counted(counter, i), p.read_end.get(), f)).detach();
        rt.spawn(sleeper(Counted(counter, i), 10s, f)).detach();
        REQUIRE(wait_count(f.reached, 2));
    }
    CHECK(counter.alive() == 0);
    // No read of the dead runtimes lingers in the kernel to swallow this byte.
    const char x = 'q';
    REQUIRE(::write(p.write_end.get(), &x, 1) == 1);
    char got = 0;
    CHECK(::read(p.read_end.get(), &got, 1) == 1);
    CHECK(got == 'q');
}

}  // TEST_SUITE("reactor/io_shutdown")
