// tests/support/broadcast.hpp: what the eddy::broadcast tests (tests/sync/broadcast_*_test.cpp)
// share: receive_one as a task of its own, drain (every value and lag a receiver sees until the
// stream ends) and try_drain (the same with try_receive, until empty).
// `using namespace eddy::test::broadcast_tests;` brings in the names the tests use.
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <eddy/sync/broadcast.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/counted.hpp"
#include "support/off_worker.hpp"
#include "support/sync_helpers.hpp"
#include "support/waiting.hpp"

namespace eddy::test::broadcast_tests {

using eddy::JoinHandle;
using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::broadcast::Lagged;
using eddy::broadcast::Receiver;
using eddy::broadcast::Sender;
using eddy::test::outcome;
using eddy::test::settle;

inline Task<std::optional<int>> receive_one(Receiver<int>& rx) { co_return co_await rx.receive(); }

/// What a receiver saw until the end of the stream: the values, and each lag's count in
/// `lags` (in `values`, a lag is marked by the value -1).
struct Log {
    std::vector<std::int64_t> values;
    std::vector<std::uint64_t> lags;
};

/// Receives until the end of the stream; a `slow` receiver yields after each value, to fall
/// behind a fast sender.
inline Task<Log> drain(Receiver<std::int64_t> rx, bool slow = false) {
    Log log;
    for (;;) {
        try {
            std::optional<std::int64_t> v = co_await rx.receive();
            if (!v) break;
            log.values.push_back(*v);
            if (slow) co_await eddy::yield_now();
        } catch (const Lagged& lag) {
            log.lags.push_back(lag.missed());
            log.values.push_back(-1);
        }
    }
    co_return log;
}

/// try_receive until empty; "L<n>" for a lag of n.
inline std::vector<std::string> try_drain(Receiver<int>& rx) {
    std::vector<std::string> got;
    for (;;) {
        try {
            std::optional<int> v = rx.try_receive();
            if (!v) break;
            got.push_back(std::to_string(*v));
        } catch (const Lagged& lag) {
            got.push_back("L" + std::to_string(lag.missed()));
        }
    }
    return got;
}

}  // namespace eddy::test::broadcast_tests
