// examples/chat_server.cpp: a line chat with rooms, written the way a user would on eddy: a
// broadcast channel per room, and per client a reader, a pump and a writer. It is the server
// of tools/eddy-bench's fanout_pubsub rows (driven by benchmarks/pubsub_load); its Tokio twin
// is benchmarks/tokio-servers/src/bin/chat_server.rs, with the same protocol, capacities and
// stats line.
//
//     chat_server [--host ADDR] [--port N] [--workers N]
//     nc 127.0.0.1 7878                 then type "JOIN lobby" and chat
//
// Protocol. Lines end with "\n" (a "\r" before it is dropped); a line is at most 4 KiB, its
// "\n" included.
//   1. The client's first line is "JOIN <room>": "JOIN", one space, and a room of 1 to 64
//      characters from [A-Za-z0-9_-] (a decimal id or a name). The server makes the client a
//      member and answers "JOINED <room>\n": every line sent to the room after that answer
//      reaches the client.
//   2. Every later line the client sends (empty lines are ignored) goes to every member of its
//      room, the sender included: a sender sees its own line come back, which is its
//      acknowledgement. The server forwards exactly the bytes of the line, then "\n". All
//      members see a room's lines in one order, the order the server read them in, so each
//      sender's lines arrive in the order it sent them.
//   3. Bad input is answered "ERR <reason>\n" and the connection closed: a first line that is
//      not "JOIN <room>" ("ERR expected JOIN <room>"), a line over 4 KiB ("ERR line too long").
//      After the JOIN, the answer follows the lines already queued for the client; the room's
//      lines not queued for it yet (its own last ones too) are not sent to it.
//   4. A client that does not keep up is dropped as too slow: closed, without an answer (there
//      is no room to queue one), and counted. That is when its outbox (1024 lines) is full, or
//      when it fell more than its room's ring (4096 lines) behind (broadcast::Lagged).
//   5. A client leaves by closing its side: the lines already queued for it are written (not
//      those of the room that were not queued yet), then the server closes.
// What a peer can make the server hold: the line being read (4 KiB), its share of its room's
// ring (4096 lines, each line's bytes held once however many members it goes to:
// std::shared_ptr<const std::string>) and its outbox (1024 of those pointers). A room lives
// while it has members.
//
// Per client (one connection task of examples/support/tcp_server.hpp, which gives the command
// line, the listener and the SIGINT/SIGTERM shutdown; a chat has no requests to finish, so
// serve_chat takes no examples::Drain and every client is cancelled as the drain begins):
//   reader  reads lines through an io::FramedRead with an io::LinesCodec bounded to 4 KiB a
//           line and sends each into the room's broadcast::Sender; at the end of its input it
//           closes the outbox;
//   pump    receives from the client's broadcast::Receiver and try_send's each line into the
//           outbox (an eddy::Channel of 1024 lines): it never waits for the client;
//   writer  drains the outbox into the socket through an io::FramedWrite with the same codec:
//           whatever is queued is fed, then goes out in one write.
// Reader and writer run under when_all inside a TaskGroup that also holds the pump; a drop
// cancels the group, which closes the connection.
//
// Stats: connections accepted, clients dropped as too slow, lines received (sent into a room),
// lines delivered (written to clients from their outboxes, an ERR answer after the JOIN
// included) and, of the drops, those for lagging behind the ring (the others overflowed their
// outbox). SIGUSR1 prints one line, and the same line is the last of the output at shutdown:
//     chat_server stats: clients=200 dropped=0 lines_in=60000 lines_out=1200000 lagged=0 workers=2 polled=...
//         ... sched_delay_p50_us=12 sched_delay_p99_us=410 sched_delay_max_us=2270
// Space-separated key=value pairs after "stats:", so that keys can be added at the end
// (tools/eddy-bench reads the keys it knows; the twin's line stops after lagged=: Tokio 1.24
// has no stable runtime metrics).
#include "support/tcp_server.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace {

constexpr std::size_t kMaxLine = 4096;         // a line, its "\n" included
constexpr std::size_t kRoomCapacity = 4096;    // lines in a room's broadcast ring
constexpr std::size_t kOutboxCapacity = 1024;  // lines queued for one client
constexpr std::size_t kMaxRoomName = 64;
constexpr std::size_t kWriteHighWater = 16384;  // bytes fed before the writer writes unasked

/// A line as it goes out, without its "\n" (the codec adds it); shared by every outbox it is
/// queued in.
using Line = std::shared_ptr<const std::string>;
using Outbox = eddy::Channel<Line>;
using LineReader = eddy::io::FramedRead<eddy::net::TcpStream, eddy::io::LinesCodec>;
using LineWriter = eddy::io::FramedWrite<eddy::net::TcpStream, eddy::io::LinesCodec>;

struct Stats {
    std::atomic<std::uint64_t> clients{0};    // connections accepted
    std::atomic<std::uint64_t> dropped{0};    // clients dropped as too slow
    std::atomic<std::uint64_t> lagged{0};     // of those, dropped for lagging behind the room's ring
    std::atomic<std::uint64_t> lines_in{0};   // lines sent into a room
    std::atomic<std::uint64_t> lines_out{0};  // lines written to clients
};

Stats g_stats;

struct Room {
    explicit Room(std::string n) : name(std::move(n)), tx(eddy::broadcast::channel<Line>(kRoomCapacity).first) {}
    const std::string name;
    eddy::broadcast::Sender<Line> tx;
    std::size_t members = 0;  // guarded by Rooms::lock_
};

/// The rooms that have members, by name. A room is made by its first JOIN and forgotten when
/// its last member leaves.
class Rooms {
public:
    /// A client's place in a room: the room and the client's receiver of it. Leaves on
    /// destruction.
    class Membership {
    public:
        Membership(Rooms& rooms, const std::string& name) : rooms_(rooms) {
            std::lock_guard lock(rooms.lock_);
            std::shared_ptr<Room>& room = rooms.rooms_[name];
            if (!room) room = std::make_shared<Room>(name);
            ++room->members;
            room_ = room;
            rx_.emplace(room->tx.subscribe());
        }
        Membership(const Membership&) = delete;
        Membership& operator=(const Membership&) = delete;
        ~Membership() {
            rx_.reset();
            std::lock_guard lock(rooms_.lock_);
            if (--room_->members == 0) rooms_.rooms_.erase(room_->name);
        }
        Room& room() const noexcept { return *room_; }
        eddy::broadcast::Receiver<Line>& receiver() noexcept { return *rx_; }

    private:
        Rooms& rooms_;
        std::shared_ptr<Room> room_;
        std::optional<eddy::broadcast::Receiver<Line>> rx_;
    };

private:
    std::mutex lock_;  // held for a lookup, never across a co_await
    std::unordered_map<std::string, std::shared_ptr<Room>> rooms_;
};

Rooms g_rooms;

/// The room of a "JOIN <room>" line, or nullopt when it is not one.
std::optional<std::string> parse_join(std::string_view line) {
    constexpr std::string_view kJoin = "JOIN ";
    if (line.substr(0, kJoin.size()) != kJoin) return std::nullopt;
    const std::string_view room = line.substr(kJoin.size());
    if (room.empty() || room.size() > kMaxRoomName) return std::nullopt;
    for (const char c : room) {
        const bool ok =
            (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
        if (!ok) return std::nullopt;
    }
    return std::string(room);
}

/// Sends the client's lines into its room until its input ends or breaks the protocol (then
/// `too_long` is set); either way it closes the outbox, so the writer ends after what is
/// queued, and the pump stops queuing (ChannelClosed).
eddy::Task<void> read_lines(LineReader& in, Room& room, Outbox& outbox, bool& too_long) {
    try {
        while (std::optional<std::string> line = co_await in.next()) {
            if (line->empty()) continue;
            room.tx.send(std::make_shared<const std::string>(std::move(*line)));
            g_stats.lines_in.fetch_add(1, std::memory_order_relaxed);
        }
    } catch (const eddy::io::LineTooLong&) {
        too_long = true;
    }
    // Written before the close: the writer reads it after its receive saw the close (the
    // channel's lock orders the two).
    outbox.close();
}

/// Moves the room's lines into the outbox without ever waiting for the client; a client whose
/// outbox is full, or who fell behind the room's ring, is dropped (the group cancelled).
eddy::Task<void> pump(eddy::broadcast::Receiver<Line>& rx, Outbox& outbox, eddy::TaskGroup& group) {
    for (;;) {
        std::optional<Line> line;
        bool lagged = false;
        try {
            line = co_await rx.receive();
        } catch (const eddy::broadcast::Lagged&) {
            lagged = true;
        }
        if (!lagged && !line) co_return;  // the room closed (not while the client is a member)
        bool queued = false;
        if (!lagged) {
            try {
                queued = outbox.try_send(std::move(*line));
            } catch (const eddy::ChannelClosed&) {
                co_return;  // the reader finished: the writer drains what is queued
            }
        }
        if (!queued) {
            g_stats.dropped.fetch_add(1, std::memory_order_relaxed);
            if (lagged) g_stats.lagged.fetch_add(1, std::memory_order_relaxed);
            group.cancel();
            co_return;
        }
    }
}

/// Writes the outbox to the socket until it is closed and drained; what is queued together
/// goes out in one write. Then, if the reader met a line over the limit, the answer: the last
/// thing the client gets (queued by the reader instead, it could be overtaken by a line the
/// pump queued on another worker between the answer and the close).
eddy::Task<void> write_lines(LineWriter& out, Outbox& outbox, const bool& too_long) {
    while (std::optional<Line> line = co_await outbox.receive()) {
        std::uint64_t n = 0;
        do {
            co_await out.feed(**line);
            ++n;
        } while ((line = outbox.try_receive()));
        co_await out.flush();
        g_stats.lines_out.fetch_add(n, std::memory_order_relaxed);
    }
    if (too_long) {
        co_await out.send(std::string_view("ERR line too long"));
        g_stats.lines_out.fetch_add(1, std::memory_order_relaxed);
    }
}

eddy::Task<void> serve_chat(eddy::net::TcpStream& s) {
    g_stats.clients.fetch_add(1, std::memory_order_relaxed);
    LineReader in(s, eddy::io::LinesCodec(kMaxLine));
    LineWriter out(s, eddy::io::LinesCodec(kMaxLine), kWriteHighWater);
    std::optional<std::string> room;
    std::string_view refusal;
    try {
        const std::optional<std::string> line = co_await in.next();
        if (!line) co_return;
        room = parse_join(*line);
        if (!room) refusal = "ERR expected JOIN <room>";
    } catch (const eddy::io::LineTooLong&) {
        refusal = "ERR line too long";
    }
    if (!refusal.empty()) {
        co_await out.send(refusal);
        co_return;  // the socket closes as this frame goes
    }
    Rooms::Membership member(g_rooms, *room);
    // The answer goes out before the writer starts, so nothing else writes yet; the lines
    // sent to the room from here on are queued in the receiver meanwhile.
    co_await out.send("JOINED " + *room);
    Outbox outbox(kOutboxCapacity);
    bool too_long = false;  // set by the reader, answered by the writer
    co_await eddy::task_group([&](eddy::TaskGroup& group) -> eddy::Task<void> {
        group.spawn(pump(member.receiver(), outbox, group));
        co_await eddy::when_all(read_lines(in, member.room(), outbox, too_long), write_lines(out, outbox, too_long));
        group.cancel();  // the pump, waiting for the room's next line
    });
}

/// The stats line (see the top of the file).
void print_stats(eddy::Runtime& rt) {
    const eddy::RuntimeMetrics m = rt.metrics();
    const auto load = [](const std::atomic<std::uint64_t>& n) { return std::to_string(n.load()); };
    std::string text = "chat_server stats:";
    text.append(" clients=").append(load(g_stats.clients));
    text.append(" dropped=").append(load(g_stats.dropped));
    text.append(" lines_in=").append(load(g_stats.lines_in));
    text.append(" lines_out=").append(load(g_stats.lines_out));
    text.append(" lagged=").append(load(g_stats.lagged));
    text.append(" workers=").append(std::to_string(m.workers.size()));
    text.append(" polled=").append(std::to_string(m.total(&eddy::WorkerMetrics::tasks_polled)));
    text.append(" steals=").append(std::to_string(m.total(&eddy::WorkerMetrics::steals)));
    text.append(" parks=").append(std::to_string(m.total(&eddy::WorkerMetrics::parks)));
    text.append(" budget_yields=").append(std::to_string(m.total(&eddy::WorkerMetrics::budget_yields)));
    // How long woken tasks waited for a worker (wake-up to poll), in microseconds.
    const eddy::DurationHistogram delay = m.scheduling_delay();
    const auto us = [](std::chrono::nanoseconds d) { return std::to_string(d.count() / 1000); };
    text.append(" sched_delay_p50_us=").append(us(delay.percentile(0.5)));
    text.append(" sched_delay_p99_us=").append(us(delay.percentile(0.99)));
    text.append(" sched_delay_max_us=").append(us(delay.max()));
    text.push_back('\n');
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    examples::ServerHooks hooks;
    hooks.signals = {SIGUSR1};
    hooks.on_signal = [](int, eddy::Runtime& rt) { print_stats(rt); };
    hooks.on_shutdown = print_stats;
    return examples::run_tcp_server("chat_server", "a line chat with rooms", argc, argv, serve_chat, hooks);
}
