// eddy/tasks/errors.hpp: the exceptions eddy throws for misuse of tasks and runtimes.
//
// Every error a caller can provoke by using the API wrongly is one of these types, so that
// it can be caught on purpose; none of them is thrown for a condition the caller cannot
// prevent. I/O failures are std::system_error carrying the errno (see eddy/io).
#pragma once

#include <stdexcept>

namespace eddy {

/// Awaiting (or spawning) a Task or JoinHandle that holds no coroutine: default-constructed,
/// moved-from, or already awaited once (awaiting consumes the result).
class BrokenTask : public std::logic_error {
public:
    using std::logic_error::logic_error;
};

/// The runtime is stopped: `spawn` after `Runtime::shutdown()`, or awaiting a JoinHandle
/// (or `block_on`) whose task was destroyed by shutdown before it finished.
class RuntimeStopped : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// An operation that needs a runtime worker (`eddy::spawn`, `yield_now`, `when_all`) was
/// used on a thread that is not one; or `block_on` / `shutdown` was called *from* a worker,
/// where blocking would deadlock the runtime.
class WrongThread : public std::logic_error {
public:
    using std::logic_error::logic_error;
};

} // namespace eddy
