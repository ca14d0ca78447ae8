// tests/streams/readiness_test.cpp: io::readable, io::writable and io::poll on descriptors eddy
// does not own (eddy/io/readiness.hpp): they complete when the descriptor is ready (and not
// before), report hang-ups, wake from plain threads, are cancelled without losing data, and
// report errors with the errno.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <eddy/io/readiness.hpp>
#include <eddy/time/sleep.hpp>
#include <eddy/time/with_timeout.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/metrics.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using namespace std::chrono_literals;

namespace {

/// A pipe whose two ends close with it; non-blocking on request.
struct Pipe {
    int r = -1, w = -1;
    explicit Pipe(bool nonblocking = false) {
        int fds[2];
        REQUIRE(::pipe2(fds, O_CLOEXEC | (nonblocking ? O_NONBLOCK : 0)) == 0);
        r = fds[0];
        w = fds[1];
    }
    ~Pipe() {
        if (r >= 0) ::close(r);
        if (w >= 0) ::close(w);
    }
    void close_write() {
        ::close(w);
        w = -1;
    }
};

std::error_code error_of(Runtime& rt, Task<unsigned> t) {
    try {
        (void)rt.block_on(std::move(t));
    } catch (const std::system_error& e) {
        return e.code();
    }
    return {};
}

}  // namespace

TEST_CASE("readable completes only once a byte is written, and leaves the byte to read") {
    Runtime rt(RuntimeConfig{.workers = 2});
    Pipe p;
    std::atomic<bool> written{false};
    const auto [ev, was_written_first] =
        rt.block_on([](Pipe& pipe, std::atomic<bool>& wrote) -> Task<std::pair<unsigned, bool>> {
            auto writer = [](Pipe& ends, std::atomic<bool>& flag) -> Task<void> {
                co_await eddy::sleep(50ms);
                flag.store(true);
                REQUIRE(::write(ends.w, "x", 1) == 1);
            };
            auto waiter = [](Pipe& ends, std::atomic<bool>& flag) -> Task<std::pair<unsigned, bool>> {
                const unsigned revents = co_await eddy::io::readable(ends.r);
                co_return std::pair{revents, flag.load()};
            };
            auto [r, _] = co_await eddy::when_all(waiter(pipe, wrote), writer(pipe, wrote));
            co_return r;
        }(p, written));
    CHECK((ev & POLLIN) != 0);
    CHECK(was_written_first);
    char c = 0;
    CHECK(::read(p.r, &c, 1) == 1);  // readiness consumed nothing
    CHECK(c == 'x');
}

TEST_CASE("writable on a full pipe completes only after the reader drains it") {
    Runtime rt(RuntimeConfig{.workers = 2});
    Pipe p(true);
    std::vector<char> chunk(4096, 'y');
    std::size_t filled = 0;
    for (;;) {
        const ssize_t n = ::write(p.w, chunk.data(), chunk.size());
        if (n < 0) break;
        filled += static_cast<std::size_t>(n);
    }
    REQUIRE(errno == EAGAIN);
    REQUIRE(filled > 0);
    std::atomic<bool> drained{false};
    std::thread reader([&] {
        std::this_thread::sleep_for(50ms);
        drained.store(true);
        std::vector<char> buf(filled);
        std::size_t got = 0;
        while (got < filled) {
            const ssize_t n = ::read(p.r, buf.data(), buf.size());
            if (n > 0) got += static_cast<std::size_t>(n);
        }
    });
    const unsigned ev = rt.block_on([](int fd) -> Task<unsigned> { co_return co_await eddy::io::writable(fd); }(p.w));
    const bool after_drain = drained.load();
    reader.join();
    CHECK((ev & POLLOUT) != 0);
    CHECK(after_drain);
}

TEST_CASE("poll reports the hang-up when the write end closes") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Pipe p;
    std::thread closer([&p] {
        std::this_thread::sleep_for(30ms);
        p.close_write();
    });
    const unsigned ev =
        rt.block_on([](int fd) -> Task<unsigned> { co_return co_await eddy::io::poll(fd, POLLIN); }(p.r));
    closer.join();
    CHECK((ev & POLLHUP) != 0);
}

TEST_CASE("an eventfd written by a plain thread wakes the waiting task") {
    Runtime rt(RuntimeConfig{.workers = 2});
    const int efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    REQUIRE(efd >= 0);
    constexpr int kRounds = 50;
    std::thread producer([efd] {
        for (int i = 0; i < kRounds; ++i) {
            std::this_thread::sleep_for(1ms);
            const std::uint64_t one = 1;
            REQUIRE(::write(efd, &one, sizeof one) == sizeof one);
        }
    });
    // The driver loop of an event-loop library: wait, then consume what is there.
    const std::uint64_t total = rt.block_on([](int event_fd) -> Task<std::uint64_t> {
        std::uint64_t sum = 0;
        while (sum < kRounds) {
            (void)co_await eddy::io::readable(event_fd);
            std::uint64_t v = 0;
            if (::read(event_fd, &v, sizeof v) == sizeof v) sum += v;  // EAGAIN: another look
        }
        co_return sum;
    }(efd));
    producer.join();
    ::close(efd);
    CHECK(total == kRounds);
}

TEST_CASE("a line protocol from a plain thread, read by a task that waits with readable()") {
    Runtime rt(RuntimeConfig{.workers = 2});
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
    std::thread writer([fd = sv[1]] {
        for (int i = 0; i < 100; ++i) {
            const std::string line = "line " + std::to_string(i) + "\n";
            std::size_t off = 0;
            while (off < line.size()) {
                const ssize_t n = ::send(fd, line.data() + off, line.size() - off, MSG_NOSIGNAL);
                if (n > 0) off += static_cast<std::size_t>(n);
                else std::this_thread::sleep_for(100us);
            }
            if (i % 10 == 0) std::this_thread::sleep_for(1ms);
        }
        ::shutdown(fd, SHUT_WR);
    });
    const std::vector<std::string> lines = rt.block_on([](int fd) -> Task<std::vector<std::string>> {
        std::vector<std::string> out;
        std::string pending;
        for (;;) {
            char buf[64];
            const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            if (n == 0) break;
            if (n < 0) {
                REQUIRE(errno == EAGAIN);
                (void)co_await eddy::io::readable(fd);
                continue;
            }
            pending.append(buf, static_cast<std::size_t>(n));
            for (std::size_t nl; (nl = pending.find('\n')) != std::string::npos; pending.erase(0, nl + 1))
                out.push_back(pending.substr(0, nl));
        }
        co_return out;
    }(sv[0]));
    writer.join();
    ::close(sv[0]);
    ::close(sv[1]);
    REQUIRE(lines.size() == 100);
    CHECK(lines.front() == "line 0");
    CHECK(lines.back() == "line 99");
}

TEST_CASE("cancelled by its token or by the task's cancellation, with nothing left in the kernel") {
    Runtime rt(RuntimeConfig{.workers = 2});
    Pipe p;
    std::stop_source source;
    std::thread canceller([&source] {
        std::this_thread::sleep_for(30ms);
        source.request_stop();
    });
    CHECK(error_of(rt, [](int fd, std::stop_token t) -> Task<unsigned> {
              co_return co_await eddy::io::readable(fd, std::move(t));
          }(p.r, source.get_token())) == std::errc::operation_canceled);
    canceller.join();
    CHECK_THROWS_AS(rt.block_on(eddy::with_timeout(
                        [](int fd) -> Task<unsigned> { co_return co_await eddy::io::readable(fd); }(p.r), 30ms)),
                    eddy::TimedOut);
    // The data that comes later is all there for the next look.
    REQUIRE(::write(p.w, "z", 1) == 1);
    CHECK((rt.block_on([](int fd) -> Task<unsigned> { co_return co_await eddy::io::readable(fd); }(p.r)) & POLLIN) !=
          0);
    char c = 0;
    CHECK(::read(p.r, &c, 1) == 1);
    // The timed-out poll's cancellation completes in the kernel just after the task resumed;
    // the reactor reaps it when it next wakes. Wait for that (bounded: a hang, not a time),
    // then only the reactor's own wake-up read is left in the kernel.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (rt.metrics().reactor.in_flight > 1 && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(1ms);
    CHECK(rt.metrics().reactor.in_flight <= 1);
}

TEST_CASE("a bad descriptor is std::system_error with EBADF; off a worker, WrongThread") {
    Runtime rt(RuntimeConfig{.workers = 1});
    CHECK(error_of(rt, []() -> Task<unsigned> { co_return co_await eddy::io::readable(-1); }()) ==
          std::errc::bad_file_descriptor);
    int closed;
    {
        Pipe p;
        closed = p.r;
    }
    CHECK(error_of(rt, [](int fd) -> Task<unsigned> { co_return co_await eddy::io::writable(fd); }(closed)) ==
          std::errc::bad_file_descriptor);
    // Awaited by hand on this (non-worker) thread: the await refuses before submitting.
    Pipe p;
    bool threw = false;
    try {
        eddy::io::ReadinessAwaiter a = eddy::io::readable(p.r);
        (void)a.await_suspend(std::noop_coroutine());
    } catch (const eddy::WrongThread&) {
        threw = true;
    }
    CHECK(threw);
}

TEST_CASE("200 tasks waiting on 200 pipes are all woken") {
    Runtime rt(RuntimeConfig{.workers = 2});
    constexpr int kPipes = 200;
    std::vector<std::unique_ptr<Pipe>> pipes;
    for (int i = 0; i < kPipes; ++i) pipes.push_back(std::make_unique<Pipe>());
    std::atomic<int> waiting{0};
    auto waits = rt.spawn([](std::vector<std::unique_ptr<Pipe>>& all_pipes, std::atomic<int>& waiters) -> Task<int> {
        std::vector<Task<unsigned>> all;
        for (auto& p : all_pipes)
            all.push_back([](int fd, std::atomic<int>& count) -> Task<unsigned> {
                count.fetch_add(1);
                co_return co_await eddy::io::readable(fd);
            }(p->r, waiters));
        const std::vector<unsigned> evs = co_await eddy::when_all(std::move(all));
        int readable = 0;
        for (unsigned ev : evs) readable += (ev & POLLIN) != 0 ? 1 : 0;
        co_return readable;
    }(pipes, waiting));
    while (waiting.load() < kPipes) std::this_thread::sleep_for(1ms);
    for (auto& p : pipes) REQUIRE(::write(p->w, "!", 1) == 1);
    CHECK(rt.block_on([](eddy::JoinHandle<int> h) -> Task<int> {
        co_return co_await std::move(h);
    }(std::move(waits))) == kPipes);
}
