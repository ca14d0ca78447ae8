//! eddy/runtime/this_worker.hpp: which worker runs the calling code.
//! @file
#pragma once

#include <cstddef>
#include <optional>

namespace eddy::this_worker {

/// The index (0 .. workers-1) of the runtime worker running the caller, or std::nullopt on
/// any other thread. A task may move between workers at every co_await.
std::optional<std::size_t> index() noexcept;

}  // namespace eddy::this_worker
