// tests/net/socket_io_read_test.cpp: reads on the readiness-based socket path
// (eddy/net/detail/socket_io.hpp, io/reactor/poll_state.hpp) as TcpStream uses it, over
// loopback, IPv4 and IPv6:
//   - a waiting read cancelled by its own token (or its task's) from a plain thread, alone and
//     racing a peer's write 200 times: every byte read exactly once, in order;
//   - end of stream: the waiting read returns 0, every read after it 0 at once (also when the
//     last bytes and the FIN come together), and the socket's multishot poll goes with the stream
//     (Runtime::metrics().reactor.sockets_polled);
//   - a connection dropped mid-read: FIN after random chunks (every byte, then 0), RST with
//     SO_LINGER 0 (a prefix of the bytes, then ECONNRESET or 0; never a hang).
// The peer and the helpers: tests/support/socket_io.hpp. close() and stop: socket_io_close_test.cpp;
// one poll for two waiters, and wake-ups: socket_io_wake_test.cpp.
#include <doctest/doctest.h>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <eddy/eddy.hpp>

#include "support/socket_io.hpp"

using namespace eddy::test::socket_io;

// ---- Cancelling a waiting read from a plain thread -------------------------------------

TEST_CASE("a read waiting on a quiet socket, cancelled from a plain thread, consumes nothing") {
    for_each_loopback([&](const SocketAddr& lo, const std::size_t workers) {
        // By the read's own token, and by its task's cancellation (with_stop_token).
        for (const bool by_task : {false, true}) {
            CAPTURE(by_task);
            auto listener = TcpListener::bind(lo);
            Runtime rt(RuntimeConfig{.workers = workers});
            FileDescriptor peer = plain_connect(listener.local_address());
            TcpStream s = run(rt, listener.accept());
            const std::size_t base = polled(rt);

            std::stop_source stop;
            Started<std::optional<std::string>> pending(
                rt, by_task ? eddy::with_stop_token(read_once(s), stop.get_token()) : read_once(s, stop.get_token()));
            REQUIRE(wait_polled(rt, base + 1));  // the read has queued itself: the socket is polled
            CHECK_FALSE(pending.ready());
            std::thread canceller([&stop] { stop.request_stop(); });
            canceller.join();
            CHECK(pending.get() == std::nullopt);  // OperationCancelled

            REQUIRE(send_all(peer.get(), "abc"));
            CHECK(run(rt, read_once(s)) == std::optional<std::string>("abc"));
            // And the socket goes on working with its poll armed.
            REQUIRE(send_all(peer.get(), "defg"));
            CHECK(run(rt, read_once(s)) == std::optional<std::string>("defg"));
        }
    });
}

TEST_CASE("200 reads cancelled from a plain thread while a peer's write races in: every byte read once, in order") {
    for_each_loopback([&](const SocketAddr& lo, const std::size_t workers) {
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = workers});
        FileDescriptor peer = plain_connect(listener.local_address());
        TcpStream s = run(rt, listener.accept());

        std::mt19937 rng(static_cast<std::uint32_t>(workers * 7919 + (lo.is_v4() ? 0 : 1)));
        std::string sent;
        std::string received;
        int completed = 0;
        int cancelled = 0;
        std::atomic<int> send_failures{0};
        for (int round = 0; round < 200; ++round) {
            CAPTURE(round);
            const std::string chunk = std::to_string(round) + ";";  // distinct and in order
            const auto write_delay = std::chrono::microseconds(rng() % 300);
            const auto cancel_delay = std::chrono::microseconds(rng() % 300);
            const bool by_task = round % 2 == 1;
            std::atomic<bool> about_to_wait{false};
            std::stop_source stop;
            Started<std::optional<std::string>> pending(
                rt, by_task ? eddy::with_stop_token(read_once(s, {}, &about_to_wait), stop.get_token())
                            : read_once(s, stop.get_token(), &about_to_wait));
            std::thread writer([&] {
                if (!spin_until(about_to_wait)) return;
                std::this_thread::sleep_for(write_delay);
                if (!send_all(peer.get(), chunk)) send_failures.fetch_add(1);
            });
            CHECK(spin_until(about_to_wait));
            std::this_thread::sleep_for(cancel_delay);
            stop.request_stop();
            writer.join();
            const std::optional<std::string> got = pending.get();
            if (got.has_value()) {
                ++completed;
                CHECK_FALSE(got->empty());  // no end of stream here: a completed read has bytes
                received += *got;
            } else {
                ++cancelled;
            }
            sent += chunk;
            // What a cancelled read left in the socket (all of the chunk), or what a
            // completed one did not take yet, read now: the next round starts on a quiet
            // socket, so its read waits again.
            while (received.size() < sent.size()) {
                const std::optional<std::string> rest = run(rt, read_once(s));
                REQUIRE(rest.has_value());
                REQUIRE_FALSE(rest->empty());
                received += *rest;
            }
            if (!got.has_value()) CHECK(received.substr(received.size() - chunk.size()) == chunk);
        }
        CHECK(send_failures.load() == 0);
        CHECK(received.size() == sent.size());
        CHECK(received == sent);
        MESSAGE(lo.to_string() << ", " << workers << " worker(s): " << completed << " reads completed, " << cancelled
                               << " cancelled");
    });
}

// ---- End of stream and the poll's life ------------------------------------------------

TEST_CASE("end of stream: the waiting read returns 0, every read after it 0, and the poll goes with the stream") {
    for_each_loopback([&](const SocketAddr& lo, const std::size_t workers) {
        for (const bool full_close : {false, true}) {  // shutdown(SHUT_WR), or close()
            CAPTURE(full_close);
            auto listener = TcpListener::bind(lo);
            Runtime rt(RuntimeConfig{.workers = workers});
            FileDescriptor peer = plain_connect(listener.local_address());
            std::optional<TcpStream> s(run(rt, listener.accept()));
            const std::size_t base = polled(rt);

            Started<std::size_t> pending(rt, read_count(*s));
            REQUIRE(wait_polled(rt, base + 1));  // waiting, with a poll armed
            CHECK_FALSE(pending.ready());
            if (full_close) peer.close();
            else REQUIRE(::shutdown(peer.get(), SHUT_WR) == 0);
            CHECK(pending.get() == 0);
            // End of stream stays: no event comes again, and no read waits for one.
            for (int i = 0; i < 5; ++i) CHECK(run(rt, read_count(*s)) == 0);
            // Several readers at once see it too.
            CHECK(run(rt, read_counts(*s, 4)) == std::vector<std::size_t>(4, 0));
            s.reset();  // closes the socket: its poll is cancelled
            CHECK(wait_polled(rt, base));
        }
    });
}

TEST_CASE("the last bytes and the FIN together: the short read that takes the bytes does not hide the end of stream") {
    for_each_loopback([&](const SocketAddr& lo, const std::size_t workers) {
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = workers});
        const std::size_t base = polled(rt);
        for (int round = 0; round < 50; ++round) {
            CAPTURE(round);
            FileDescriptor peer = plain_connect(listener.local_address());
            std::optional<TcpStream> s(run(rt, listener.accept()));
            // Even rounds: the reader waits first (a poll armed); odd rounds: bytes and FIN
            // are there before the first read.
            const bool waits = round % 2 == 0;
            // (A unique_ptr, not an optional: g++ 12 -O3 warns maybe-uninitialized on the latter.)
            std::unique_ptr<Started<std::string>> pending;
            if (waits) {
                pending = std::make_unique<Started<std::string>>(
                    rt, eddy::test::read_to_end(*s));  // a 4 KiB buffer: 3 bytes is a short read
                REQUIRE(wait_polled(rt, base + 1));
            }
            REQUIRE(send_all(peer.get(), "xyz"));
            REQUIRE(::shutdown(peer.get(), SHUT_WR) == 0);
            if (!waits) pending = std::make_unique<Started<std::string>>(rt, eddy::test::read_to_end(*s));
            CHECK(pending->get() == "xyz");
            CHECK(run(rt, read_count(*s)) == 0);
            s.reset();
            REQUIRE(wait_polled(rt, base));  // this round's poll is gone
        }
    });
}

// ---- A connection dropped mid-read ----------------------------------------------------

TEST_CASE("a peer closing (FIN) after random chunks with pauses: a 100-byte reader gets every byte, then 0") {
    for_each_loopback([&](const SocketAddr& lo, const std::size_t workers) {
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = workers});
        for (std::uint32_t round = 0; round < 6; ++round) {
            const std::uint32_t seed = round * 31 + static_cast<std::uint32_t>(workers) + (lo.is_v4() ? 0u : 1000u);
            CAPTURE(seed);
            std::mt19937 rng(seed);
            struct Chunk {
                std::size_t size;
                std::chrono::microseconds pause;
            };
            std::vector<Chunk> chunks(1 + rng() % 30);
            std::size_t total = 0;
            for (auto& c : chunks) {
                c.size = 1 + rng() % 4000;
                c.pause = std::chrono::microseconds(rng() % 3 == 0 ? 0 : rng() % 2000);
                total += c.size;
            }
            const std::string payload = as_string(eddy::test::pattern(total, seed + 1));
            FileDescriptor peer = plain_connect(listener.local_address());
            TcpStream s = run(rt, listener.accept());
            Started<std::string> reader(rt, read_all_with(s, 100));
            std::atomic<bool> send_failed{false};
            std::thread writer([&, fd = peer.release()] {
                std::size_t at = 0;
                for (const Chunk& c : chunks) {
                    if (!send_all(fd, std::string_view(payload).substr(at, c.size))) send_failed.store(true);
                    at += c.size;
                    std::this_thread::sleep_for(c.pause);
                }
                ::close(fd);  // FIN
            });
            writer.join();
            const std::string got = reader.get();
            CHECK_FALSE(send_failed.load());
            CHECK(got.size() == total);
            CHECK(got == payload);
        }
    });
}

namespace {

struct UntilEnd {
    std::string data;
    std::error_code error;  // empty: the stream ended with a 0-byte read
};

/// Reads with a 100-byte buffer until end of stream or an error.
Task<UntilEnd> read_until_end_or_error(TcpStream& s) {
    UntilEnd r;
    std::array<std::byte, 100> buf;
    try {
        for (;;) {
            const std::size_t n = co_await s.read(buf);
            if (n == 0) break;
            r.data += text(std::span(buf).first(n));
        }
    } catch (const std::system_error& e) {
        r.error = e.code();
    }
    co_return r;
}

}  // namespace

TEST_CASE("a peer resetting (SO_LINGER 0) while the reader waits: a prefix of the bytes, then ECONNRESET or 0") {
    for_each_loopback([&](const SocketAddr& lo, const std::size_t workers) {
        auto listener = TcpListener::bind(lo);
        Runtime rt(RuntimeConfig{.workers = workers});
        int resets = 0;
        int ends = 0;
        int whole = 0;
        for (std::uint32_t round = 0; round < 20; ++round) {
            const std::uint32_t seed = round * 17 + static_cast<std::uint32_t>(workers) + (lo.is_v4() ? 0u : 1000u);
            CAPTURE(seed);
            std::mt19937 rng(seed);
            const std::size_t total = 1 + rng() % 20000;
            const std::size_t first = 1 + rng() % total;  // sent in two pieces
            const auto pause_before = std::chrono::microseconds(rng() % 2000);
            const auto pause_between = std::chrono::microseconds(rng() % 1000);
            const auto pause_after = std::chrono::microseconds(rng() % 3 == 0 ? 0 : rng() % 3000);
            const std::string payload = as_string(eddy::test::pattern(total, seed + 1));
            FileDescriptor peer = plain_connect(listener.local_address());
            TcpStream s = run(rt, listener.accept());
            Started<UntilEnd> reader(rt, read_until_end_or_error(s));
            std::atomic<bool> peer_failed{false};
            std::thread writer([&, fd = peer.release()] {
                std::this_thread::sleep_for(pause_before);
                const std::string_view p(payload);
                if (!send_all(fd, p.substr(0, first))) peer_failed.store(true);
                std::this_thread::sleep_for(pause_between);
                if (!send_all(fd, p.substr(first))) peer_failed.store(true);
                std::this_thread::sleep_for(pause_after);
                const linger l{1, 0};
                if (::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l) != 0) peer_failed.store(true);
                ::close(fd);  // RST
            });
            writer.join();
            const UntilEnd r = reader.get();
            CHECK_FALSE(peer_failed.load());
            CHECK(r.data.size() <= total);
            CHECK(r.data == payload.substr(0, r.data.size()));
            if (r.error) {
                CHECK(r.error == std::errc::connection_reset);
                ++resets;
            } else {
                ++ends;
            }
            if (r.data.size() == total) ++whole;
        }
        MESSAGE(lo.to_string() << ", " << workers << " worker(s): " << resets << " ended with ECONNRESET, " << ends
                               << " with 0; " << whole << " of 20 got every byte");
    });
}
