// <eddy/eddy.hpp>: the one header users include.
#pragma once

#include <eddy/fs/file.hpp>
#include <eddy/fs/read_file.hpp>
#include <eddy/io/buf_reader.hpp>
#include <eddy/io/buf_writer.hpp>
#include <eddy/io/descriptor_stream.hpp>
#include <eddy/io/file_descriptor.hpp>
#include <eddy/io/frames.hpp>
#include <eddy/io/pipe.hpp>
#include <eddy/io/read_write.hpp>
#include <eddy/io/readiness.hpp>
#include <eddy/io/signal.hpp>
#include <eddy/io/sleep.hpp>
#include <eddy/io/stream.hpp>
#include <eddy/io/stream_errors.hpp>
#include <eddy/io/stream_ops.hpp>
#include <eddy/io/with_timeout.hpp>
#include <eddy/net/connect_error.hpp>
#include <eddy/net/lookup.hpp>
#include <eddy/net/socket_addr.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/net/tcp_stream.hpp>
#include <eddy/net/udp_socket.hpp>
#include <eddy/net/unix_addr.hpp>
#include <eddy/net/unix_datagram.hpp>
#include <eddy/net/unix_listener.hpp>
#include <eddy/net/unix_stream.hpp>
#include <eddy/runtime/channel.hpp>
#include <eddy/runtime/config.hpp>
#include <eddy/runtime/coop.hpp>
#include <eddy/runtime/event.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/latch.hpp>
#include <eddy/runtime/metrics.hpp>
#include <eddy/runtime/mutex.hpp>
#include <eddy/runtime/oneshot.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/semaphore.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/spawn_blocking.hpp>
#include <eddy/runtime/task_group.hpp>
#include <eddy/runtime/this_worker.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/runtime/when_any.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

// eddy::tls, when this build has it (OpenSSL found; <eddy/config.hpp> says).
#include <eddy/config.hpp>
#if EDDY_HAS_TLS
#include <eddy/tls/context.hpp>
#include <eddy/tls/error.hpp>
#include <eddy/tls/stream.hpp>
#endif
