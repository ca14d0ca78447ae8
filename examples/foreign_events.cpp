// examples/foreign_events.cpp: living with code that is not eddy's.
//
// Four patterns a service meets when it embeds a runtime:
//   1. A blocking library call (here the system resolver, getaddrinfo) goes to the blocking
//      pool with eddy::spawn_blocking, so no worker waits on it.
//   2. A non-blocking library with a descriptor of its own (here a small "driver" that a
//      plain thread feeds through a pipe, as a database client's socket would be fed by its
//      server) is driven from a task: wait with eddy::io::readable, let the library consume
//      what is there, repeat.
//   3. A plain thread hands a value to a waiting task with a oneshot channel.
//   4. The main thread runs a task on the runtime from outside and waits for its result
//      (Runtime::spawn, then block_on on the handle; Runtime::block_on does both).
// Expected output (tests/examples/foreign_events.expected):
//   localhost resolves to 127.0.0.1
//   driver: 5 messages, last "message 5"
//   from a plain thread: 42
//   done
#include <eddy/eddy.hpp>

#include <fcntl.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>

namespace {

/// 1. A blocking call: the resolver may read files and talk to a DNS server.
std::string resolve_v4(const std::string& host) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    addrinfo* res = nullptr;
    if (const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0)
        throw std::runtime_error("getaddrinfo(" + host + "): " + ::gai_strerror(rc));
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, text, sizeof text);
    ::freeaddrinfo(res);
    return text;
}

/// 2. A stand-in for a library with its own non-blocking descriptor and a "process what is
/// there" call, the shape of curl's multi interface or a database client's async API.
class Driver {
public:
    Driver() {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw std::system_error(errno, std::generic_category(), "pipe2");
        in_ = fds[0];
        out_ = fds[1];
    }
    ~Driver() {
        ::close(in_);
        if (out_ >= 0) ::close(out_);
    }
    int fd() const noexcept { return in_; }  // what the library wants watched for reading
    int feed_fd() const noexcept { return out_; }
    void close_feed() {
        ::close(out_);
        out_ = -1;
    }
    /// Consumes what is there without blocking; false once the feed has ended.
    bool process() {
        char buf[256];
        for (;;) {
            const ssize_t n = ::read(in_, buf, sizeof buf);
            if (n == 0) return false;
            if (n < 0) return true;  // EAGAIN: nothing more for now
            for (ssize_t i = 0; i < n; ++i) {
                if (buf[i] == '\n') {
                    ++messages_;
                    last_ = std::move(partial_);
                    partial_.clear();
                } else {
                    partial_ += buf[i];
                }
            }
        }
    }
    int messages() const noexcept { return messages_; }
    const std::string& last() const noexcept { return last_; }

private:
    int in_ = -1, out_ = -1;
    int messages_ = 0;
    std::string partial_, last_;
};

eddy::Task<void> drive(Driver& d) {
    while (d.process()) (void)co_await eddy::io::readable(d.fd());
}

eddy::Task<int> wait_for(eddy::oneshot::Receiver<int> rx) { co_return co_await rx; }

eddy::Task<void> service(Driver& d, eddy::oneshot::Receiver<int> rx) {
    // 1: the resolver on a blocking thread; the worker goes on with 2 and 3 meanwhile.
    eddy::JoinHandle<std::string> addr = eddy::spawn_blocking([] { return resolve_v4("localhost"); });
    auto [_, value] = co_await eddy::when_all(drive(d), wait_for(std::move(rx)));
    std::printf("localhost resolves to %s\n", (co_await std::move(addr)).c_str());
    std::printf("driver: %d messages, last \"%s\"\n", d.messages(), d.last().c_str());
    std::printf("from a plain thread: %d\n", value);
}

}  // namespace

int main() {
    eddy::Runtime rt(eddy::RuntimeConfig::from_env({.workers = 2}));
    Driver driver;
    auto [tx, rx] = eddy::oneshot::channel<int>();
    // 4: the task runs on the runtime; this thread only waits for it at the end.
    eddy::JoinHandle<void> running = rt.spawn(service(driver, std::move(rx)));
    // The "server" side of the driver, and a thread with a value for a waiting task.
    std::thread feeder([&driver] {
        for (int i = 1; i <= 5; ++i) {
            const std::string line = "message " + std::to_string(i) + "\n";
            if (::write(driver.feed_fd(), line.data(), line.size()) < 0) std::perror("write");
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        driver.close_feed();
    });
    std::thread producer([tx = std::move(tx)]() mutable { tx.send(42); });  // 3
    feeder.join();
    producer.join();
    rt.block_on([](eddy::JoinHandle<void> h) -> eddy::Task<void> { co_await std::move(h); }(std::move(running)));
    std::printf("done\n");
}
