// tests/streams/pipe_test.cpp: io::pipe, io::read/io::write on its ends, and io::FileDescriptor:
// bytes through the pipe, end of file once the write end is closed, a reader waiting while a
// writer on another worker writes later, 1 MiB through the 64 KiB pipe buffer, non-blocking
// ends (the reactor polls instead of failing with EAGAIN), EBADF, EPIPE without SIGPIPE, and
// FileDescriptor's ownership rules (closes on destruction, moves, release, close()).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <eddy/io/file_descriptor.hpp>
#include <eddy/io/pipe.hpp>
#include <eddy/io/read_write.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/this_worker.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/task.hpp>

#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::io::FileDescriptor;
using eddy::test::bytes;
using eddy::test::error_of;
using eddy::test::kDeadline;
using eddy::test::past;
using eddy::test::run;
using eddy::test::text;

namespace {

/// True if `fd` is an open descriptor of this process.
bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }
/// True if `fd` is closed: fcntl fails with EBADF.
bool is_closed(int fd) { return ::fcntl(fd, F_GETFD) == -1 && errno == EBADF; }

Task<std::size_t> read_some(int fd, std::span<std::byte> buf) { co_return co_await eddy::io::read(fd, buf); }
Task<std::size_t> write_some(int fd, std::span<const std::byte> data) { co_return co_await eddy::io::write(fd, data); }

Task<void> write_all(int fd, std::span<const std::byte> data) {
    while (!data.empty()) data = data.subspan(co_await eddy::io::write(fd, data));
}

Task<std::vector<std::byte>> read_to_end(int fd) {
    std::vector<std::byte> out;
    std::vector<std::byte> buf(8192);
    for (;;) {
        const std::size_t n = co_await eddy::io::read(fd, buf);
        if (n == 0) co_return out;
        out.insert(out.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
    }
}

struct Basics {
    std::size_t wrote = 0;
    std::string got;
    std::size_t eof = 99, eof_again = 99;
    std::error_code write_read_end, read_write_end;
};

Task<Basics> basics() {
    auto [rd, wr] = eddy::io::pipe();
    Basics b;
    b.wrote = co_await eddy::io::write(wr.get(), bytes("abc"));
    std::array<std::byte, 16> buf;
    b.got = text(std::span(buf).first(co_await eddy::io::read(rd.get(), buf)));
    // Each end goes one way only.
    b.write_read_end = co_await error_of(write_some(rd.get(), bytes("x")));
    b.read_write_end = co_await error_of(read_some(wr.get(), buf));
    wr.close();
    b.eof = co_await eddy::io::read(rd.get(), buf);  // end of file: 0, not an error
    b.eof_again = co_await eddy::io::read(rd.get(), buf);
    co_return b;
}

}  // namespace

TEST_CASE("pipe(): what is written to one end is read from the other; 0 once the write end is closed") {
    {
        auto p = eddy::io::pipe();
        CHECK(p.read_end);
        CHECK(p.write_end);
        CHECK(p.read_end.get() != p.write_end.get());
        CHECK((::fcntl(p.read_end.get(), F_GETFD) & FD_CLOEXEC) != 0);
        CHECK((::fcntl(p.write_end.get(), F_GETFD) & FD_CLOEXEC) != 0);
        CHECK((::fcntl(p.read_end.get(), F_GETFL) & O_ACCMODE) == O_RDONLY);
        CHECK((::fcntl(p.write_end.get(), F_GETFL) & O_ACCMODE) == O_WRONLY);
    }
    Runtime rt(RuntimeConfig{.workers = 1});
    const Basics b = run(rt, basics());
    CHECK(b.wrote == 3);
    CHECK(b.got == "abc");
    CHECK(b.write_read_end == std::errc::bad_file_descriptor);
    CHECK(b.read_write_end == std::errc::bad_file_descriptor);
    CHECK(b.eof == 0);
    CHECK(b.eof_again == 0);
}

namespace {

struct LateWrite {
    std::optional<std::size_t> reader_worker, writer_worker;
    bool written_before_read_returned = false;
    std::string got;
};

Task<void> late_reader(int fd, std::atomic<int>& started, std::atomic<bool>& reading, const std::atomic<bool>& written,
                       LateWrite& out) {
    out.reader_worker = co_await eddy::test::rendezvous(started, 2);
    std::array<std::byte, 16> buf;
    reading.store(true);
    const std::size_t n = co_await eddy::io::read(fd, buf);  // the pipe is empty: this waits
    out.written_before_read_returned = written.load();
    out.got = text(std::span(buf).first(n));
}

Task<void> late_writer(int fd, std::atomic<int>& started, const std::atomic<bool>& reading, std::atomic<bool>& written,
                       LateWrite& out) {
    out.writer_worker = co_await eddy::test::rendezvous(started, 2);
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (!reading.load() && !past(deadline)) co_await eddy::yield_now();
    for (int i = 0; i < 10; ++i) co_await eddy::yield_now();  // later still
    written.store(true);                                      // before the write: a read that returns must see it
    co_await eddy::io::write(fd, bytes("late"));
}

Task<LateWrite> reader_waits_for_writer() {
    auto p = eddy::io::pipe();
    LateWrite out;
    std::atomic<int> started{0};
    std::atomic<bool> reading{false}, written{false};
    co_await eddy::when_all(late_reader(p.read_end.get(), started, reading, written, out),
                            late_writer(p.write_end.get(), started, reading, written, out));
    co_return out;
}

}  // namespace

TEST_CASE("a reader task waits on an empty pipe while a writer on another worker writes later") {
    Runtime rt(RuntimeConfig{.workers = 2});
    const LateWrite w = run(rt, reader_waits_for_writer());
    REQUIRE(w.reader_worker.has_value());  // both tasks ran at once ...
    REQUIRE(w.writer_worker.has_value());
    CHECK(*w.reader_worker != *w.writer_worker);  // ... so on different workers
    CHECK(w.written_before_read_returned);
    CHECK(w.got == "late");
}

namespace {

Task<std::vector<std::byte>> through_pipe(const std::vector<std::byte>& payload) {
    auto p = eddy::io::pipe();
    auto writer = [](FileDescriptor wr, const std::vector<std::byte>& data) -> Task<void> {
        co_await write_all(wr.get(), data);
        // Closed now, so the reader sees end of file: a parameter would otherwise live until
        // the frame is destroyed, which when_all does only after the reader finished.
        wr.close();
    };
    auto both = co_await eddy::when_all(writer(std::move(p.write_end), payload), read_to_end(p.read_end.get()));
    co_return std::move(std::get<1>(both));
}

}  // namespace

TEST_CASE("1 MiB through a pipe (64 KiB buffer): the writer waits for the reader, even on one worker") {
    const std::vector<std::byte> payload = eddy::test::pattern(1 << 20, 5);
    for (const std::size_t workers : {std::size_t{1}, std::size_t{2}}) {
        CAPTURE(workers);
        Runtime rt(RuntimeConfig{.workers = workers});
        const std::vector<std::byte> back = run(rt, through_pipe(payload));
        CHECK(back.size() == payload.size());
        CHECK(back == payload);
    }
}

namespace {

void set_nonblocking(int fd) { REQUIRE(::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK) == 0); }

struct NonBlocking {
    std::string got;
    std::size_t filled = 0;
    std::size_t late_write = 0;
    std::size_t drained = 0;
};

Task<void> write_later(int fd, std::span<const std::byte> data) {
    for (int i = 0; i < 10; ++i) co_await eddy::yield_now();
    co_await write_all(fd, data);
}

Task<std::size_t> drain_later(int fd, std::size_t n) {
    for (int i = 0; i < 10; ++i) co_await eddy::yield_now();
    std::vector<std::byte> buf(n);
    std::size_t got = 0;
    while (got < n) got += co_await eddy::io::read(fd, std::span(buf).subspan(got));
    co_return got;
}

Task<std::size_t> write_one(int fd) { co_return co_await eddy::io::write(fd, bytes("!")); }

Task<NonBlocking> nonblocking_ends() {
    auto p = eddy::io::pipe();
    set_nonblocking(p.read_end.get());
    set_nonblocking(p.write_end.get());
    NonBlocking r;
    // An empty non-blocking pipe: the read waits for data instead of failing with EAGAIN.
    std::array<std::byte, 16> buf;
    auto rd = co_await eddy::when_all(read_some(p.read_end.get(), buf), write_later(p.write_end.get(), bytes("data")));
    r.got = text(std::span(buf).first(std::get<0>(rd)));
    // A full non-blocking pipe: the write waits for room instead of failing with EAGAIN.
    const std::vector<std::byte> chunk(4096, std::byte{'f'});
    for (;;) {
        const ssize_t n = ::write(p.write_end.get(), chunk.data(), chunk.size());
        if (n < 0) break;  // EAGAIN: full
        r.filled += static_cast<std::size_t>(n);
    }
    auto wr = co_await eddy::when_all(write_one(p.write_end.get()), drain_later(p.read_end.get(), r.filled + 1));
    r.late_write = std::get<0>(wr);
    r.drained = std::get<1>(wr);
    co_return r;
}

}  // namespace

TEST_CASE("non-blocking ends: a read of an empty pipe and a write to a full one wait instead of failing") {
    Runtime rt(RuntimeConfig{.workers = 2});
    const NonBlocking r = run(rt, nonblocking_ends());
    CHECK(r.got == "data");
    CHECK(r.filled >= 4096);
    CHECK(r.late_write == 1);
    CHECK(r.drained == r.filled + 1);
}

namespace {

struct BadFds {
    std::error_code read_minus_one, write_minus_one, read_closed, write_closed;
};

Task<BadFds> bad_fds() {
    BadFds b;
    std::array<std::byte, 4> buf;
    b.read_minus_one = co_await error_of(read_some(-1, buf));
    b.write_minus_one = co_await error_of(write_some(-1, bytes("x")));
    int rd = -1, wr = -1;
    {
        auto p = eddy::io::pipe();
        rd = p.read_end.get();
        wr = p.write_end.get();
    }  // both ends closed; nothing else in this test opens descriptors meanwhile
    b.read_closed = co_await error_of(read_some(rd, buf));
    b.write_closed = co_await error_of(write_some(wr, bytes("x")));
    co_return b;
}

}  // namespace

TEST_CASE("io::read and io::write on -1 or a closed descriptor: EBADF") {
    Runtime rt(RuntimeConfig{.workers = 1});
    const BadFds b = run(rt, bad_fds());
    CHECK(b.read_minus_one == std::errc::bad_file_descriptor);
    CHECK(b.write_minus_one == std::errc::bad_file_descriptor);
    CHECK(b.read_closed == std::errc::bad_file_descriptor);
    CHECK(b.write_closed == std::errc::bad_file_descriptor);
}

namespace {

Task<std::error_code> write_to_closed_pipe() {
    auto p = eddy::io::pipe();
    p.read_end.close();
    co_return co_await error_of(write_some(p.write_end.get(), bytes("nobody reads this")));
}

/// Runs write_to_closed_pipe() in a child process with SIGPIPE at its default action
/// (terminate). Exit codes: 0 EPIPE, 1 another error, 2 no error, 3 an exception.
/// Returns the wait status.
int epipe_in_child() {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::signal(SIGPIPE, SIG_DFL);
        int code = 3;
        try {
            Runtime rt(RuntimeConfig{.workers = 1});
            const std::error_code ec = rt.block_on(write_to_closed_pipe());
            code = ec == std::errc::broken_pipe ? 0 : ec ? 1 : 2;
        } catch (...) {
        }
        ::_exit(code);
    }
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
        if (past(deadline)) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            FAIL("the child did not finish in time");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling a child, not ordering
    }
    return status;
}

}  // namespace

TEST_CASE("io::write to a pipe whose read end is closed: EPIPE, and SIGPIPE does not kill the process") {
    // In a child: if the write raised SIGPIPE, its default action would end the whole test
    // program. The child reports what it saw through its exit code.
    const int status = epipe_in_child();
    if (WIFSIGNALED(status)) {
        CHECK_MESSAGE(WTERMSIG(status) != SIGPIPE, "io::write on a pipe without reader raised SIGPIPE");
        FAIL_CHECK("the child died of signal " << WTERMSIG(status));
    } else {
        REQUIRE(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);  // 0: EPIPE
    }

    // With SIGPIPE ignored (what a server usually does), the error is EPIPE here too.
    struct sigaction ignore {
    }, old{};
    ignore.sa_handler = SIG_IGN;
    REQUIRE(::sigaction(SIGPIPE, &ignore, &old) == 0);
    {
        Runtime rt(RuntimeConfig{.workers = 1});
        CHECK(run(rt, write_to_closed_pipe()) == std::errc::broken_pipe);
    }
    ::sigaction(SIGPIPE, &old, nullptr);
}

TEST_CASE("FileDescriptor closes on destruction, and only what it owns") {
    int rd = -1, wr = -1;
    {
        auto p = eddy::io::pipe();
        rd = p.read_end.get();
        wr = p.write_end.get();
        CHECK(is_open(rd));
        CHECK(is_open(wr));
    }
    CHECK(is_closed(rd));
    CHECK(is_closed(wr));

    // An empty descriptor: -1, false, and destroying or closing it does nothing.
    FileDescriptor empty;
    CHECK(empty.get() == -1);
    CHECK_FALSE(empty);
    CHECK_NOTHROW(empty.close());

    // Moves transfer ownership; the moved-from object is empty.
    auto p = eddy::io::pipe();
    const int fd = p.read_end.get();
    FileDescriptor a(std::move(p.read_end));
    CHECK(p.read_end.get() == -1);
    CHECK(a.get() == fd);
    FileDescriptor b;
    b = std::move(a);
    CHECK(a.get() == -1);
    CHECK(b.get() == fd);
    FileDescriptor& alias = b;
    b = std::move(alias);  // self-move keeps the descriptor
    CHECK(b.get() == fd);
    CHECK(is_open(fd));

    // Move-assigning onto an owner closes what it held.
    const int old_write = p.write_end.get();
    auto q = eddy::io::pipe();
    const int q_read = q.read_end.get();
    p.write_end = std::move(q.read_end);
    CHECK(is_closed(old_write));
    CHECK(p.write_end.get() == q_read);
    CHECK(is_open(q_read));

    // release() gives the descriptor up: nothing closes it afterwards.
    int released = -1;
    {
        FileDescriptor owner(::dup(fd));
        released = owner.release();
        CHECK(owner.get() == -1);
    }
    CHECK(is_open(released));
    ::close(released);
}

TEST_CASE("FileDescriptor::close closes at once, and throws EBADF for a descriptor that was not open") {
    auto p = eddy::io::pipe();
    const int fd = p.read_end.get();
    p.read_end.close();
    CHECK(p.read_end.get() == -1);
    CHECK(is_closed(fd));
    CHECK_NOTHROW(p.read_end.close());  // empty now: a no-op

    // Adopt a number that is not open (fd was just closed and nothing reopened it).
    FileDescriptor bad(fd);
    try {
        bad.close();
        FAIL_CHECK("close of a closed descriptor did not throw");
    } catch (const std::system_error& e) {
        CHECK(e.code() == std::errc::bad_file_descriptor);
    }
    CHECK(bad.get() == -1);  // empty either way: the destructor will not try again
}
