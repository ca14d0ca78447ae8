//! eddy/tls/stream.hpp: tls::Stream<S>, TLS over any byte stream S (a net::TcpStream, or
//! anything meeting io::AsyncStream), itself an io::AsyncStream, so a BufReader or a codec
//! sits on it as on a socket.
//!
//!     auto ctx = eddy::tls::Context::client();
//!     auto tcp = co_await eddy::net::TcpStream::connect(addr);
//!     auto s = co_await eddy::tls::Stream<eddy::net::TcpStream>::connect(ctx, std::move(tcp), "example.com");
//!     co_await s.write_all(request);
//!     std::size_t n = co_await s.read(buf);   // 0: the peer closed cleanly (close_notify)
//!     co_await s.shutdown();                  // our close_notify
//!
//! OpenSSL runs on memory BIOs (detail::Engine, a .cpp): every byte goes through S, so eddy's
//! sockets, errors and cancellation apply unchanged. The client verifies the server's
//! certificate (the Context's CAs) and that it is for `server_name` (a host name, sent as SNI
//! too, or an IP address, checked against the certificate's IP entries).
//!
//! Errors: tls::Error (eddy/tls/error.hpp) for TLS failures: errc::certificate (rejected
//! certificate or name), errc::protocol (alerts, bad records, no common version),
//! errc::truncated (the peer closed without close_notify: never a silent 0). Errors of S
//! (ECONNRESET, EPIPE, ...) pass through as std::system_error with the errno. After a TLS
//! failure the session is dead: every later read/write throws the same error.
//!
//! Concurrency: one task may read while others write, on any workers (OpenSSL's session is
//! behind a lock held for one call at a time, never across a co_await). Reads: one at a time
//! (they share one input buffer); a read started while another is pending throws
//! std::logic_error at once and the pending one goes on unharmed. Writes and shutdown: from
//! any number of tasks; they take turns under an eddy::Mutex, so each call's records leave
//! whole, in the order the calls got it. Call from tasks on a runtime's workers.
//! Buffers must stay valid until the co_await returns; the Stream must not be moved or
//! destroyed while an operation is pending.
//!
//! Cancellation (the awaiting task's, as for every eddy operation): the operation throws
//! eddy::OperationCancelled. A cancelled read has consumed nothing: reading may go on. A
//! cancelled write may have handed its bytes to TLS already (encrypted, queued): they then go
//! out first with the next write, write_all or shutdown, so the stream stays consistent, but
//! the caller cannot know whether that call's data will be sent. A cancelled connect or
//! accept leaves nothing (drop S).
//!
//! Closing: shutdown() sends close_notify and leaves S open (the peer's own close_notify is
//! read() == 0); close() closes S without close_notify; the destructor sends nothing.
//! @file
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <eddy/io/stream.hpp>
#include <eddy/net/tcp_stream.hpp>
#include <eddy/sync/mutex.hpp>
#include <eddy/tasks/task.hpp>
#include <eddy/tls/certificate.hpp>
#include <eddy/tls/context.hpp>
#include <eddy/tls/detail/engine.hpp>
#include <eddy/tls/error.hpp>

namespace eddy::tls {

template <io::AsyncStream S>
/// TLS over the byte stream S, which the Stream owns (see the file comment); itself an
/// io::AsyncStream. Move-only.
class Stream {
    using Engine = detail::Engine;
    using Status = Engine::Status;
    static constexpr std::size_t kRecord = 16 * 1024;  // the most one TLS record carries

public:
    /// The client handshake over `stream`, verifying the server's certificate and that it is
    /// for `server_name`. tls::Error (certificate, protocol, truncated); std::invalid_argument
    /// for an empty `server_name`; tls::Error (setup) for a server Context.
    static Task<Stream> connect(Context ctx, S stream, std::string server_name) {
        Stream s(std::move(stream), Engine::client(ctx, server_name));
        co_await s.handshake("eddy::tls::Stream::connect");
        co_return s;
    }
    /// The server handshake over `stream` with a Context::server(). tls::Error (protocol,
    /// truncated; setup for a client Context).
    static Task<Stream> accept(Context ctx, S stream) {
        Stream s(std::move(stream), Engine::server(ctx));
        co_await s.handshake("eddy::tls::Stream::accept");
        co_return s;
    }

    /// Moves the session and the stream below; the moved-from Stream may only be destroyed or
    /// assigned to.
    Stream(Stream&&) noexcept = default;
    /// Moves the session and the stream below, dropping this one's without close_notify.
    Stream& operator=(Stream&&) noexcept = default;

    /// Reads what is available (at least one byte unless `buf` is empty); 0 once the peer
    /// sent close_notify. tls::Error (truncated: the stream below ended without one);
    /// std::logic_error while another read of this stream is pending.
    Task<std::size_t> read(std::span<std::byte> buf) {
        if (buf.empty()) co_return 0;
        const ReadTurn turn(*engine_);
        for (;;) {
            const Engine::Step s = engine_->read(buf, "eddy::tls::Stream::read");
            // Data goes back at once: a send that failed or was cancelled now would lose it.
            if (s.status == Status::kDone) co_return s.n;
            if (s.status == Status::kFailed) co_await fail(s, false);
            co_await send_if_free();  // what reading queued (a TLS 1.3 key-update answer), before waiting
            if (s.status == Status::kClosed) co_return 0;
            engine_->commit_input(co_await stream_.read(engine_->input_space()));
        }
    }

    /// Writes some of `data` (at most one record, 16 KiB; at least one byte unless empty),
    /// sent on to S before it returns; gives the count.
    Task<std::size_t> write(std::span<const std::byte> data) {
        if (data.empty()) co_return 0;
        MutexGuard g = co_await engine_->write_lock().lock();
        co_await send_locked();  // what a cancelled write left
        co_return co_await write_locked(data.first(std::min(data.size(), kRecord)), "eddy::tls::Stream::write");
    }
    /// Writes all of `data`; gives its size.
    Task<std::size_t> write_all(std::span<const std::byte> data) {
        MutexGuard g = co_await engine_->write_lock().lock();
        co_await send_locked();
        for (std::size_t at = 0; at < data.size();)
            at += co_await write_locked(data.subspan(at, std::min(data.size() - at, kRecord)),
                                        "eddy::tls::Stream::write_all");
        co_return data.size();
    }
    /// write_all of the text's bytes.
    Task<std::size_t> write_all(std::string_view text) { return write_all(std::as_bytes(std::span(text))); }

    /// Sends close_notify (after anything still queued): the peer reads end of stream. S stays
    /// open (reads may go on until the peer's close_notify); writing afterwards is
    /// tls::Error (protocol).
    Task<void> shutdown() {
        MutexGuard g = co_await engine_->write_lock().lock();
        co_await send_locked();
        const Engine::Step s = engine_->shutdown("eddy::tls::Stream::shutdown");
        if (s.status == Status::kFailed) co_await fail(s, true);
        co_await send_locked();
    }

    /// Closes S now, without close_notify (the peer sees a truncation); S's errors.
    void close() requires requires(S& s) { s.close(); }
    { stream_.close(); }

    /// The stream below (its address, options; writing to it corrupts the session).
    S& next_layer() noexcept { return stream_; }
    const S& next_layer() const noexcept { return stream_; }  ///< the stream below, read-only
    /// The ALPN protocol agreed on in the handshake ("" if none).
    std::string alpn_protocol() const { return engine_->alpn_protocol(); }
    /// The peer's certificate (its subject, SANs, validity, serial, fingerprint), if it sent
    /// one and it verified: the server's on a client; on a server, the client's when the
    /// Context asks for one (require_client_certificate()), else empty. Also after a
    /// resumed handshake (the session remembers it).
    std::optional<PeerCertificate> peer_certificate() const { return engine_->peer_certificate(); }
    /// Whether this handshake resumed an earlier session (a ticket: no certificate exchange).
    bool session_resumed() const { return engine_->session_resumed(); }

private:
    // A read's hold on the input buffer, from its start to its end (also by an exception, or
    // the frame's destruction).
    class ReadTurn {
    public:
        explicit ReadTurn(Engine& e) : e_(e) {
            if (!e_.begin_read())
                throw std::logic_error(
                    "eddy::tls::Stream::read: another read of this stream is pending (one reader at a time; "
                    "writes may run alongside)");
        }
        ReadTurn(const ReadTurn&) = delete;
        ReadTurn& operator=(const ReadTurn&) = delete;
        ~ReadTurn() { e_.end_read(); }

    private:
        Engine& e_;
    };

    Stream(S stream, std::unique_ptr<Engine> engine) noexcept
        : stream_(std::move(stream)), engine_(std::move(engine)) {}

    Task<void> handshake(const char* what) {
        MutexGuard g = co_await engine_->write_lock().lock();
        for (;;) {
            const Engine::Step s = engine_->handshake(what);
            if (s.status == Status::kFailed) co_await fail(s, true);
            co_await send_locked();
            if (s.status == Status::kDone) co_return;
            engine_->commit_input(co_await stream_.read(engine_->input_space()));
        }
    }

    // Under the write lock: encrypts `data` (one record) and sends everything queued.
    Task<std::size_t> write_locked(std::span<const std::byte> data, const char* what) {
        const Engine::Step s = engine_->write(data, what);
        if (s.status == Status::kFailed) co_await fail(s, true);
        co_await send_locked();
        co_return s.n;
    }

    // Under the write lock: sends the queued ciphertext to S.
    Task<void> send_locked() {
        for (std::span<const std::byte> out; !(out = engine_->pending_output()).empty();)
            engine_->consume_output(co_await stream_.write(out));
    }

    // Ciphertext a read produced, or held tickets (engine.hpp), before the read waits: sent
    // now unless a writer holds the lock (it then goes out with that writer's records, or
    // the next write's).
    Task<void> send_if_free() {
        if (!engine_->release_for_wait()) co_return;
        if (std::optional<MutexGuard> g = engine_->write_lock().try_lock()) co_await send_locked();
    }

    // A failed step: the alert OpenSSL queued goes out if it can (`locked`: the caller holds
    // the write lock), then the TLS error is thrown.
    Task<void> fail(const Engine::Step& s, bool locked) {
        try {
            if (locked) co_await send_locked();
            else co_await send_if_free();
        } catch (...) {  // the stream below failed too: the TLS error says more
        }
        std::rethrow_exception(s.error);
    }

    S stream_;
    std::unique_ptr<Engine> engine_;
};

static_assert(io::AsyncStream<Stream<net::TcpStream>>);

}  // namespace eddy::tls
