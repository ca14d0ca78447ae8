// tests/stress/io_workloads/cancel.hpp: the cancellation workload of io_stress (case 2,
// and the timers' and the shutdown's cancellers): a board of stop sources that canceller
// tasks and a plain thread stop at random, and the writers, readers, acceptors and
// connectors whose every operation awaits with a token from that board.
#pragma once

#include <eddy/net/socket_addr.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/net/tcp_stream.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/tasks/task.hpp>
#include <eddy/time/sleep.hpp>

#include "stress/io_workloads/bookkeeping.hpp"
#include "stress/io_workloads/duplex.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace eddy::test::io_stress {

// ---- Cancellation --------------------------------------------------------------------------

/// Slots of stop_sources that cancellers stop at random. An operation that wants to be
/// cancellable publishes a fresh source in its slot and awaits with that source's token; a
/// canceller may stop it at any moment, including before the await and after completion.
class CancelBoard {
public:
    explicit CancelBoard(std::size_t n) : slots_(std::make_unique<Slot[]>(n)), n_(n) {}

    /// Publishes a fresh source in slot i (replacing the previous one) and returns it.
    std::shared_ptr<std::stop_source> arm(std::size_t i) {
        auto src = std::make_shared<std::stop_source>();
        std::lock_guard lock(slots_[i].mutex);
        slots_[i].source = src;
        return src;
    }
    /// Stops slot i's current source; true if this call made the stop request.
    bool cancel(std::size_t i) {
        std::shared_ptr<std::stop_source> src;
        {
            std::lock_guard lock(slots_[i].mutex);
            src = slots_[i].source;
        }
        return src && src->request_stop();
    }
    std::size_t size() const { return n_; }

private:
    struct Slot {
        std::mutex mutex;
        std::shared_ptr<std::stop_source> source;  // guarded by mutex
    };
    std::unique_ptr<Slot[]> slots_;
    std::size_t n_;
};

/// Stops random slots until ctx.stop_cancellers, pacing itself with short sleeps.
inline Task<void> canceller_task(Ctx& ctx, Counted, CancelBoard& board, Rng r) {
    while (!ctx.stop_cancellers.load()) {
        if (board.cancel(r.below(board.size()))) ctx.cancel_requests.fetch_add(1);
        co_await eddy::sleep(std::chrono::microseconds(10 + r.below(150)));
    }
    ctx.tasks_done.fetch_add(1);
}

/// The same from a plain thread (stop callbacks then run off the workers).
class CancellerThread {
public:
    CancellerThread(Ctx& ctx, CancelBoard& board, std::uint64_t seed)
        : thread_([&ctx, &board, this, seed] {
              Rng r{seed};
              while (!stop_.load()) {
                  if (board.cancel(r.below(board.size()))) ctx.cancel_requests.fetch_add(1);
                  // Pacing only (nothing waits on it): a stop every 100 us or so.
                  std::this_thread::sleep_for(std::chrono::microseconds(r.below(100)));
              }
          }) {}
    ~CancellerThread() { stop(); }
    void stop() {
        stop_.store(true);
        if (thread_.joinable()) thread_.join();
    }

private:
    std::atomic<bool> stop_{false};
    std::thread thread_;  // last: starts once stop_ exists
};

inline Task<void> stop_after(Ctx& ctx, Counted, std::shared_ptr<std::stop_source> src, std::chrono::microseconds d) {
    co_await eddy::sleep(d);
    if (src->request_stop()) ctx.cancel_requests.fetch_add(1);
}

/// A token for one operation: its source is published in `slot` for the random cancellers
/// and, one time in `one_in`, also stopped by a task of its own after a random delay of up
/// to `max_delay` (about the operation's own duration, so the stop races its completion).
inline std::stop_token cancellable(Ctx& ctx, CancelBoard& board, std::size_t slot, Rng& r, std::size_t one_in,
                                   std::chrono::microseconds max_delay) {
    std::shared_ptr<std::stop_source> src = board.arm(slot);
    std::stop_token token = src->get_token();
    if (r.one_in(one_in)) {
        const auto delay = std::chrono::microseconds(r.below(static_cast<std::size_t>(max_delay.count()) + 1));
        eddy::spawn(stop_after(ctx, ctx.life(), std::move(src), delay)).detach();
    }
    return token;
}

inline bool is_canceled(const std::system_error& e) { return e.code() == std::errc::operation_canceled; }

/// Writes bytes of `stream` until `limit` or until ctx.stop_writers, each operation
/// cancellable through `slot` (a cancelled write is retried: it must have written nothing),
/// then closes the writing side. Leaves the count in `written`.
inline Task<void> cancellable_writer(Ctx& ctx, Counted, Duplex d, CancelBoard& board, std::size_t slot,
                                     std::uint64_t stream, std::uint64_t limit, std::uint64_t& written, Rng r) {
    try {
        std::vector<std::byte> chunk;
        std::uint64_t pos = 0;
        while (pos < limit && !ctx.stop_writers.load()) {
            const std::size_t len =
                static_cast<std::size_t>(std::min<std::uint64_t>(limit - pos, 1 + r.below(kMaxChunk)));
            chunk.resize(len);
            fill_stream(chunk, stream, pos);
            std::span<const std::byte> left(chunk);
            while (!left.empty()) {
                try {
                    const std::size_t w = co_await d.write(left, cancellable(ctx, board, slot, r, 8, 300us));
                    if (w == 0 || w > left.size()) {
                        ctx.problems.add("stream " + std::to_string(stream) + ": write returned " + std::to_string(w));
                        co_return;
                    }
                    left = left.subspan(w);
                    ctx.bytes_sent.fetch_add(static_cast<long>(w));
                } catch (const std::system_error& e) {
                    if (!is_canceled(e)) throw;
                    ctx.writes_canceled.fetch_add(1);
                }
            }
            pos += len;
            written = pos;
            ctx.progress.fetch_add(1);
            // Now and then a pause, so that the reader waits in the kernel when stopped.
            if (r.one_in(3)) co_await eddy::sleep(std::chrono::microseconds(r.below(200)));
        }
        d.close_write();
        ctx.tasks_done.fetch_add(1);
    } catch (const std::exception& e) {
        ctx.failed("cancellable_writer " + std::to_string(stream), e);
    }
}

/// Reads `stream` to its end with every read cancellable through `slot`; checks each byte,
/// and that a cancelled read left its buffer alone. Leaves the count in `read_total`.
inline Task<void> cancellable_reader(Ctx& ctx, Counted, Duplex d, CancelBoard& board, std::size_t slot,
                                     std::uint64_t stream, std::uint64_t& read_total, Rng r) {
    try {
        constexpr std::byte kUntouched{0xA5};
        std::vector<std::byte> buf;
        std::uint64_t pos = 0;
        for (;;) {
            buf.assign(1 + r.below(kMaxChunk), kUntouched);
            std::size_t n = 0;
            try {
                n = co_await d.read(buf, cancellable(ctx, board, slot, r, 8, 300us));
            } catch (const std::system_error& e) {
                if (!is_canceled(e)) throw;
                ctx.reads_canceled.fetch_add(1);
                if (std::any_of(buf.begin(), buf.end(), [&](std::byte b) { return b != kUntouched; }))
                    ctx.problems.add("stream " + std::to_string(stream) +
                                     ": a cancelled read wrote into its buffer at offset " + std::to_string(pos));
                continue;
            }
            if (n == 0) break;
            if (n > buf.size() || !matches_stream(std::span(buf).first(n), stream, pos)) {
                ctx.problems.add("stream " + std::to_string(stream) + ": wrong bytes (" + std::to_string(n) +
                                 ") at offset " + std::to_string(pos));
                co_return;
            }
            pos += n;
            read_total = pos;
            ctx.bytes_checked.fetch_add(static_cast<long>(n));
            ctx.progress.fetch_add(1);
        }
        ctx.tasks_done.fetch_add(1);
    } catch (const std::exception& e) {
        ctx.failed("cancellable_reader " + std::to_string(stream), e);
    }
}

/// Reads the 8-byte id a connector sent and counts it in `seen`.
inline Task<void> id_reader(Ctx& ctx, Counted, eddy::net::TcpStream s, std::vector<std::atomic<int>>& seen) {
    try {
        std::uint64_t id = 0;
        co_await s.read_exact(std::as_writable_bytes(std::span(&id, 1)));
        if (id < seen.size()) seen[id].fetch_add(1);
        else ctx.problems.add("a connection sent id " + std::to_string(id));
        ctx.connections.fetch_add(1);
    } catch (const std::exception& e) {
        ctx.failed("id_reader", e);
    }
}

/// Accepts exactly `n` connections, every accept cancellable through `slot` (a cancelled
/// accept must not have taken a connection: it would be lost, and its descriptor leaked),
/// and reads each connection's id.
inline Task<void> cancellable_acceptor(Ctx& ctx, Counted, eddy::net::TcpListener& listener, CancelBoard& board,
                                       std::size_t slot, int n, std::vector<std::atomic<int>>& seen, Rng r) {
    try {
        std::vector<JoinHandle<void>> readers;
        while (static_cast<int>(readers.size()) < n) {
            try {
                eddy::net::TcpStream s = co_await listener.accept(cancellable(ctx, board, slot, r, 4, 300us));
                readers.push_back(eddy::spawn(id_reader(ctx, ctx.life(), std::move(s), seen)));
            } catch (const std::system_error& e) {
                if (!is_canceled(e)) throw;
                ctx.accepts_canceled.fetch_add(1);
            }
        }
        for (auto& h : readers) co_await std::move(h);
        ctx.tasks_done.fetch_add(1);
    } catch (const std::exception& e) {
        ctx.failed("cancellable_acceptor", e);
    }
}

/// Connects `n` times through the reactor and sends ids first_id, first_id + 1, ...
inline Task<void> connector(Ctx& ctx, Counted, eddy::net::SocketAddr addr, std::uint64_t first_id, int n, Rng r) {
    try {
        for (int i = 0; i < n; ++i) {
            eddy::net::TcpStream s = co_await eddy::net::TcpStream::connect(addr);
            const std::uint64_t id = first_id + static_cast<std::uint64_t>(i);
            co_await s.write_all(std::as_bytes(std::span(&id, 1)));
            if (r.one_in(4)) co_await eddy::sleep(std::chrono::microseconds(r.below(300)));
        }
        ctx.tasks_done.fetch_add(1);
    } catch (const std::exception& e) {
        ctx.failed("connector", e);
    }
}

/// Streams set up by the test thread for case 2 (and 4): the writer's and the reader's ends.
struct CancelStream {
    Duplex writer_end;
    Duplex reader_end;
    std::uint64_t stream;
    std::uint64_t limit;
    std::uint64_t written = 0;  // by the writer task
    std::uint64_t read = 0;     // by the reader task
};

inline std::vector<CancelStream> make_cancel_streams(Ctx& ctx, eddy::net::TcpListener& listener, int per_kind,
                                                     std::uint64_t bytes, Rng& r) {
    std::vector<CancelStream> v;
    for (int i = 0; i < 2 * per_kind; ++i) {
        auto [a, b] = i < per_kind ? pipe_duplex(r) : tcp_duplex(listener, r);
        v.push_back(
            CancelStream{std::move(a), std::move(b), mix(ctx.seed, 3000 + static_cast<std::uint64_t>(i)), bytes});
    }
    return v;
}

}  // namespace eddy::test::io_stress
