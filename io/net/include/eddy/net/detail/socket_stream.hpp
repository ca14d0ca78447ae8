// eddy/net/detail/socket_stream.hpp: the byte-stream half of the connected stream sockets
// (net::TcpStream, net::UnixStream): read, write, write_all and the vectored calls on the
// readiness path (socket_io.hpp), written once. Not for users: no stability promise.
//
// `Names` gives each operation the name its errors carry ("eddy::net::TcpStream::read").
// Every call is an awaiter built in place where it is awaited: no coroutine frame.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stop_token>
#include <string_view>
#include <utility>

#include <eddy/fs/file.hpp>
#include <eddy/io/file_descriptor.hpp>
#include <eddy/net/detail/socket_io.hpp>

namespace eddy::detail {

template <class Names>
class SocketStream {
public:
    /// Reads what is available, up to buf.size() bytes; 0 means end of stream.
    [[nodiscard]] SocketAwaiter read(std::span<std::byte> buf, std::stop_token token = {}) noexcept {
        return SocketAwaiter(io_, SocketAwaiter::Op::kRecv, buf.data(), buf.size(), Names::kRead, std::move(token));
    }
    /// Writes some of `data` (at least one byte unless it is empty); returns the count.
    [[nodiscard]] SocketAwaiter write(std::span<const std::byte> data, std::stop_token token = {}) noexcept {
        return SocketAwaiter(io_, SocketAwaiter::Op::kSend, const_cast<std::byte*>(data.data()), data.size(),
                             Names::kWrite, std::move(token));
    }
    /// Writes all of `data` (waiting whenever the socket buffer is full); gives its size.
    [[nodiscard]] SocketAwaiter write_all(std::span<const std::byte> data, std::stop_token token = {}) noexcept {
        return SocketAwaiter(io_, SocketAwaiter::Op::kSendAll, const_cast<std::byte*>(data.data()), data.size(),
                             Names::kWriteAll, std::move(token));
    }
    [[nodiscard]] SocketAwaiter write_all(std::string_view text, std::stop_token token = {}) noexcept {
        return write_all(std::as_bytes(std::span(text)), std::move(token));
    }
    /// One recvmsg(2) into several buffers, in order; 0 at end of stream. The iovecs and
    /// their buffers stay valid until the co_await returns.
    [[nodiscard]] VectoredAwaiter read_vectored(std::span<const iovec> bufs, std::stop_token token = {}) noexcept {
        return VectoredAwaiter(io_, false, bufs.data(), bufs.size(), Names::kReadVectored, std::move(token));
    }
    /// One sendmsg(2) of several buffers, in order; gives the count written (may be short).
    [[nodiscard]] VectoredAwaiter write_vectored(std::span<const iovec> bufs, std::stop_token token = {}) noexcept {
        return VectoredAwaiter(io_, true, bufs.data(), bufs.size(), Names::kWriteVectored, std::move(token));
    }

    /// Waits until the socket is readable, and reads nothing: gives 1 when bytes are there, 0
    /// at the end of the stream. Through the socket's readiness, like read: tried on the
    /// worker (a recv with MSG_PEEK), then waiting on the socket's poll, whose report that
    /// bytes came is taken as the answer without a second peek. Like any readiness report
    /// (epoll's, Tokio's readable()), that one can be stale: bytes that a read took after the
    /// kernel reported them but before the report reached this wait. Then a read after it
    /// waits, as it would have anyway. For a server that waits for a connection's next
    /// request with a stop token of its own (a drain), before it commits a buffer to the read.
    [[nodiscard]] ReadableAwaiter readable(std::stop_token token = {}) noexcept {
        return ReadableAwaiter(io_, Names::kReadable, std::move(token));
    }
    /// Sends `count` bytes of `file` from `offset` with sendfile(2): the kernel copies from
    /// the page cache into the socket, with no buffer in user space, waiting whenever the
    /// socket buffer is full. Gives the count sent, which is less than `count` only when
    /// the file ends first. `file` stays open until the co_await returns; the file position
    /// does not move. The first call makes the socket O_NONBLOCK (sendfile has no
    /// MSG_DONTWAIT), which the stream's other operations do not notice. Errors:
    /// std::system_error with the errno (EPIPE or ECONNRESET when the peer went away,
    /// EINVAL for a descriptor sendfile cannot read, such as a directory).
    [[nodiscard]] SendFileAwaiter send_file(const fs::File& file, std::uint64_t offset, std::size_t count,
                                            std::stop_token token = {}) {
        io_.make_nonblocking(Names::kSendFile);
        return SendFileAwaiter(io_, FileRange{file.native_handle(), offset}, count, Names::kSendFile, std::move(token));
    }

    int native_handle() const noexcept { return io_.fd(); }

protected:
    SocketStream() noexcept = default;
    explicit SocketStream(io::FileDescriptor fd) noexcept : io_(std::move(fd)) {}

    SocketIo io_;
};

}  // namespace eddy::detail
