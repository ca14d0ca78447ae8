// runtime/worker_count.hpp: how many workers a Runtime starts.
#pragma once

#include "runtime/private.hpp"

#include <cstddef>
#include <optional>
#include <string_view>

#include <eddy/runtime/config.hpp>

namespace eddy::detail {

/// The CPUs this process may use: its affinity mask, capped by a cgroup CPU quota (v2
/// cpu.max or v1 cpu.cfs_quota_us, rounded up). At least 1.
std::size_t available_cpus();

/// Parses an EDDY_WORKERS value: a whole number from 1 to kMaxWorkers (parse_count_env in
/// settings.hpp). Throws std::invalid_argument naming the variable and the accepted range
/// otherwise.
std::size_t parse_workers_env(std::string_view value);

/// EDDY_WORKERS if set, else `configured` (validated), else available_cpus().
std::size_t resolve_workers(std::optional<std::size_t> configured);

inline constexpr std::size_t kMaxWorkers = RuntimeConfig::kMaxWorkers;

} // namespace eddy::detail
