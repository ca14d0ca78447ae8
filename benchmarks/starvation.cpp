// benchmarks/starvation.cpp: the starvation figures of the cooperative budget (not a SPEC workload; eddy
// only; run by hand: build/benchmarks/starvation). On one worker, a task loops for 3 s on an
// operation that is always ready while a second task sleeps 10 ms in a loop; one line per
// operation gives how often the sleeper woke (about 300 possible), its worst lateness and
// how many operations the loop completed. Before the cooperative budget, the sleeper never
// ran during the loop for three of the four operations (docs/guide/01-tasks.md, "Fairness:
// yielding and the cooperative budget").
#include <eddy/eddy.hpp>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using eddy::Task;

constexpr auto kLoop = 3s;

struct Result {
    int wakeups = 0;
    Clock::duration worst_late{};
    long ops = 0;
};

Task<void> sleeper(const std::atomic<bool>& stop, Result& r) {
    while (!stop.load()) {
        const auto start = Clock::now();
        co_await eddy::sleep(10ms);
        const auto late = Clock::now() - start - 10ms;
        if (late > r.worst_late) r.worst_late = late;
        ++r.wakeups;
    }
}

/// Loops on `op()` for kLoop while a sleeper shares the worker.
template <class Op>
Task<Result> starve(Op op) {
    Result r;
    std::atomic<bool> stop{false};
    eddy::JoinHandle<void> s = eddy::spawn(sleeper(stop, r));
    const auto end = Clock::now() + kLoop;
    while (Clock::now() < end) {
        co_await op();
        ++r.ops;
    }
    stop.store(true);
    co_await std::move(s);
    co_return r;
}

void print(const char* what, const Result& r) {
    std::printf("%-36s wakeups=%4d worst_late_ms=%8.2f ops=%ld\n", what, r.wakeups,
                std::chrono::duration<double, std::milli>(r.worst_late).count(), r.ops);
}

void file_reads() {
    char name[] = "/tmp/eddy-starvation-XXXXXX";
    const int fd = ::mkstemp(name);
    const std::vector<char> data(4096, 'x');
    if (fd < 0 || ::write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size())) {
        std::perror("starvation: temporary file");
        return;
    }
    ::close(fd);
    eddy::Runtime rt(eddy::RuntimeConfig{.workers = 1});
    print("fs::File::read_at (cached file)", rt.block_on([](std::string path) -> Task<Result> {
        eddy::fs::File f = co_await eddy::fs::File::open(path);
        std::vector<std::byte> buf(512);
        co_return co_await starve([&]() -> Task<void> { (void)co_await f.read_at(buf, 0); });
    }(name)));
    ::unlink(name);
}

void socket_reads() {
    eddy::Runtime rt(eddy::RuntimeConfig{.workers = 1});
    auto listener = eddy::net::TcpListener::bind(eddy::net::SocketAddr::loopback_v4());
    print("TcpStream::read (a thread keeps it full)", rt.block_on([](eddy::net::TcpListener& l) -> Task<Result> {
        eddy::net::TcpStream client = co_await eddy::net::TcpStream::connect(l.local_address());
        eddy::net::TcpStream server = co_await l.accept();
        std::atomic<bool> done{false};
        std::thread writer([fd = client.native_handle(), &done] {
            const std::vector<char> chunk(1 << 16, 'y');
            while (!done.load())
                if (::send(fd, chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
                    std::this_thread::sleep_for(20us);
        });
        std::this_thread::sleep_for(50ms);  // let it fill the socket first
        std::vector<std::byte> buf(64);
        Result r = co_await starve([&]() -> Task<void> { (void)co_await server.read(buf); });
        done.store(true);
        writer.join();
        co_return r;
    }(listener)));
}

void mutex_locks() {
    eddy::Runtime rt(eddy::RuntimeConfig{.workers = 1});
    eddy::Mutex m;
    print("Mutex lock/unlock (uncontended)",
          rt.block_on(starve([&]() -> Task<void> { eddy::MutexGuard g = co_await m.lock(); })));
}

void channel_receives() {
    eddy::Runtime rt(eddy::RuntimeConfig{.workers = 1});
    eddy::Channel<long> ch(1 << 16);
    std::atomic<bool> done{false};
    std::thread producer([&] {
        for (long v = 0; !done.load();) {
            long item = v;
            if (ch.try_send(std::move(item))) ++v;
            else std::this_thread::yield();
        }
    });
    while (ch.size() < (1 << 15)) std::this_thread::yield();
    print("Channel::receive (fed by a thread)",
          rt.block_on(starve([&]() -> Task<void> { (void)co_await ch.receive(); })));
    done.store(true);
    producer.join();
}

}  // namespace

int main() {
    file_reads();
    socket_reads();
    mutex_locks();
    channel_receives();
}
