// <eddy/eddy.hpp>: the one header users include.
#pragma once

#include <eddy/fs/file.hpp>
#include <eddy/fs/read_file.hpp>
#include <eddy/io/file_descriptor.hpp>
#include <eddy/io/pipe.hpp>
#include <eddy/io/read_write.hpp>
#include <eddy/io/sleep.hpp>
#include <eddy/net/socket_addr.hpp>
#include <eddy/net/tcp_listener.hpp>
#include <eddy/net/tcp_stream.hpp>
#include <eddy/net/udp_socket.hpp>
#include <eddy/runtime/config.hpp>
#include <eddy/runtime/event.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/this_worker.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>
