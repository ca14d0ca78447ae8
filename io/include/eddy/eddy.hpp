// <eddy/eddy.hpp>: the one header users include.
//
// eddy is C++20 (coroutines, concepts, std::span, designated initializers). Under an older
// language mode this header stops at one #error that names the fix, instead of pages of
// errors from the headers behind it: everything else is in the #else branch, because GCC
// goes on past an #error and would parse them anyway. Only here, the documented entry
// point; tests/compile_fail/ checks the message and that it stays short.
#pragma once

#if __cplusplus < 202002L
#error "eddy needs C++20: compile with -std=c++20 or later (g++ 12, clang 14)"
#else

#include <eddy/fs/dir.hpp>
#include <eddy/fs/file.hpp>
#include <eddy/fs/metadata.hpp>
#include <eddy/fs/open_options.hpp>
#include <eddy/fs/ops.hpp>
#include <eddy/fs/read_file.hpp>
#include <eddy/io/buf_reader.hpp>
#include <eddy/io/buf_writer.hpp>
#include <eddy/io/codec.hpp>
#include <eddy/io/descriptor_stream.hpp>
#include <eddy/io/file_descriptor.hpp>
#include <eddy/io/frames.hpp>
#include <eddy/io/framed.hpp>
#include <eddy/time/interval.hpp>
#include <eddy/io/pipe.hpp>
#include <eddy/io/read_write.hpp>
#include <eddy/io/readiness.hpp>
#include <eddy/io/signal.hpp>
#include <eddy/time/sleep.hpp>
#include <eddy/io/stdio.hpp>
#include <eddy/io/stream.hpp>
#include <eddy/io/stream_errors.hpp>
#include <eddy/io/stream_ops.hpp>
#include <eddy/time/with_timeout.hpp>
#include <eddy/time/with_deadline.hpp>
#include <eddy/time/race_sleep.hpp>
#include <eddy/net/activation.hpp>
#include <eddy/net/connect_error.hpp>
#include <eddy/net/lookup.hpp>
#include <eddy/net/socket_addr.hpp>
#include <eddy/net/socket_options.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/net/tcp_socket.hpp>
#include <eddy/net/tcp_stream.hpp>
#include <eddy/net/udp_socket.hpp>
#include <eddy/net/unix_addr.hpp>
#include <eddy/net/unix_datagram.hpp>
#include <eddy/net/unix_listener.hpp>
#include <eddy/net/unix_stream.hpp>
#include <eddy/process/child.hpp>
#include <eddy/process/command.hpp>
#include <eddy/runtime/abort_handle.hpp>
#include <eddy/sync/barrier.hpp>
#include <eddy/sync/broadcast.hpp>
#include <eddy/sync/channel.hpp>
#include <eddy/runtime/config.hpp>
#include <eddy/runtime/coop.hpp>
#include <eddy/sync/event.hpp>
#include <eddy/runtime/io_driver.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/join_set.hpp>
#include <eddy/sync/latch.hpp>
#include <eddy/runtime/metrics.hpp>
#include <eddy/sync/mutex.hpp>
#include <eddy/sync/notify.hpp>
#include <eddy/sync/oneshot.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/sync/rw_lock.hpp>
#include <eddy/sync/semaphore.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/spawn_blocking.hpp>
#include <eddy/runtime/task_dump.hpp>
#include <eddy/runtime/task_group.hpp>
#include <eddy/runtime/task_tracker.hpp>
#include <eddy/runtime/this_worker.hpp>
#include <eddy/runtime/time.hpp>
#include <eddy/sync/unbounded_channel.hpp>
#include <eddy/sync/watch.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/runtime/when_any.hpp>
#include <eddy/runtime/when_any_all_results.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>
#include <eddy/tasks/task_local.hpp>

// eddy::tls, when this build has it (OpenSSL found; <eddy/config.hpp> says).
#include <eddy/config.hpp>
#if EDDY_HAS_TLS
#include <eddy/tls/certificate.hpp>
#include <eddy/tls/context.hpp>
#include <eddy/tls/error.hpp>
#include <eddy/tls/stream.hpp>
#endif

#endif  // C++20
