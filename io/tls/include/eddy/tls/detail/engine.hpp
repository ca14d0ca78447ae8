// eddy/tls/detail/engine.hpp: detail::Engine, one TLS session driven through OpenSSL's
// memory BIOs, the non-template half of tls::Stream<S>. Not for users: no stability promise.
//
// # Why memory BIOs
// OpenSSL never touches the socket: ciphertext from the peer is handed in (input_space(),
// commit_input()), ciphertext for the peer is taken out (pending_output(),
// consume_output()), and every byte travels through the stream S below (a TcpStream: eddy's
// readiness-based sockets, its cancellation and its errors). The engine never blocks and
// never suspends; tls::Stream<S> does the awaiting.
//
// # Threads
// A reader and a writer may run at once on two workers. `mu_` serializes every call into
// the SSL object and its BIOs (held for one OpenSSL call, never across a suspension). Each
// call starts with an empty OpenSSL error queue and leaves it empty (the queue is per thread
// and a coroutine may move to another worker at its next co_await): a failure is turned into
// a tls::Error (in Step::error) before `mu_` is released.
// The input buffer belongs to the one reader, the holder of the read turn (begin_read: a
// second read at once would receive ciphertext into the same buffer, so it is refused); the
// output buffer to the holder of write_lock() (every send of ciphertext happens under it, so
// records leave in order).
//
// # Session tickets
// A TLS 1.3 server sends its session tickets after the handshake proper, once it has read
// the client's Finished. Sent then, on their own, they are unacknowledged when the first
// response follows a moment later (the client has nothing to send, so it delays its ACK),
// and on a socket with Nagle's algorithm on (no TCP_NODELAY) the kernel holds that response
// until the client's delayed-ACK timer fires: about 40 ms on every fresh connection. So they
// are held (`held_`: pending_output() gives nothing) until the first write(), shutdown() or
// failure, and leave in the same send as what that queues; or until a read has to wait for
// the peer (release_for_wait()): the client's request is not there yet, and may be waiting
// for our ACK of its Finished behind its own Nagle, which the tickets then carry at once.
//
// # After a failure
// A fatal error (a bad record, an alert, a truncation) is remembered: every later
// read/write/shutdown gives the same error.
#pragma once

#include <atomic>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <eddy/sync/mutex.hpp>
#include <eddy/tls/certificate.hpp>
#include <eddy/tls/context.hpp>

struct ssl_st;  // OpenSSL's SSL
struct bio_st;  // OpenSSL's BIO

namespace eddy::tls::detail {

class Engine {
public:
    enum class Status {
        kDone,       // n bytes read or written, or the handshake/shutdown is complete
        kWantInput,  // needs more ciphertext from the peer: fill input_space(), commit_input()
        kClosed,     // the peer sent close_notify (read gives 0)
        kFailed,     // `error` holds the tls::Error to throw (after sending pending_output())
    };
    struct Step {
        Status status;
        std::size_t n = 0;
        std::exception_ptr error{};
    };

    /// A client session: SNI with `server_name` (unless it is an IP address) and the peer's
    /// certificate checked against it (as a host name, or as an IP address).
    /// std::invalid_argument if `server_name` is empty; tls::Error (setup) if `ctx` is a
    /// server context.
    static std::unique_ptr<Engine> client(const Context& ctx, const std::string& server_name);
    /// A server session. tls::Error (setup) if `ctx` is a client context.
    static std::unique_ptr<Engine> server(const Context& ctx);

    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;
    ~Engine();

    Step handshake(const char* what);
    Step read(std::span<std::byte> buf, const char* what);
    Step write(std::span<const std::byte> data, const char* what);
    /// Queues a close_notify (kDone once it is in pending_output()).
    Step shutdown(const char* what);

    /// Where the reader receives ciphertext into; then commit_input(count), 0 for end of stream.
    std::span<std::byte> input_space() noexcept { return {in_buf_.data(), in_buf_.size()}; }
    void commit_input(std::size_t n);

    /// Ciphertext to send (empty: nothing, or only held tickets); call under write_lock(). Sent bytes are
    /// consume_output()'d; what is not sent stays first in line.
    std::span<const std::byte> pending_output();
    /// Before a read waits for the peer: releases what is held ("Session tickets" above) and
    /// says whether OpenSSL holds ciphertext not yet taken by pending_output(). Any thread.
    bool release_for_wait();
    void consume_output(std::size_t n) noexcept;
    /// Held by whoever sends ciphertext.
    Mutex& write_lock() noexcept { return write_lock_; }
    /// The read turn: false when another read holds it. Acquire/release: the input buffer's
    /// bytes pass from one read to the next (on another worker, perhaps) through it.
    bool begin_read() noexcept { return !reading_.exchange(true, std::memory_order_acquire); }
    void end_read() noexcept { reading_.store(false, std::memory_order_release); }

    /// The protocol ALPN agreed on ("" if none).
    std::string alpn_protocol() const;
    /// The peer's certificate, if it sent one that verified (after the handshake).
    std::optional<PeerCertificate> peer_certificate() const;
    /// Whether this handshake resumed an earlier session.
    bool session_resumed() const;

private:
    Engine(const Context& ctx, bool server);
    Step fail(int ret, const char* what);  // with mu_ held

    Context ctx_;  // keeps the SSL_CTX (and the ALPN list its callback reads) alive
    mutable std::mutex mu_;
    ssl_st* ssl_ = nullptr;
    bio_st* in_ = nullptr;     // ciphertext from the peer (owned by ssl_)
    bio_st* out_ = nullptr;    // ciphertext for the peer (owned by ssl_)
    bool eof_ = false;         // the stream below ended
    bool held_ = false;        // the session tickets wait for the first record (see above)
    std::string server_name_;  // a client's: the key of the Context's session cache
    std::exception_ptr failed_{};
    std::vector<std::byte> in_buf_;
    std::vector<std::byte> out_buf_;  // write_lock_
    std::size_t out_pos_ = 0;         // write_lock_: out_buf_[out_pos_..] is still to send
    Mutex write_lock_;
    std::atomic<bool> reading_{false};  // the read turn (begin_read)
};

}  // namespace eddy::tls::detail
