// tests/support/off_worker.hpp: awaits a primitive's operation on a thread that is not a
// worker, to check that eddy refuses it.
#pragma once

#include <string>

#include <eddy/tasks/errors.hpp>

#include "support/waiting.hpp"

namespace eddy::test {

/// Runs `co_await make()` right here (an eager coroutine on the calling thread) and sets
/// `how` to "ok" or "wrong thread". `make` returns the awaiter (it need not be movable).
template <class Make>
Eager await_off_worker(Make make, std::string& how) {
    try {
        (void)co_await make();
        how = "ok";
    } catch (const eddy::WrongThread&) {
        how = "wrong thread";
    }
}

}  // namespace eddy::test
