// runtime/worker_count.hpp: how many workers a Runtime starts.
#pragma once

#include "private.hpp"

#include <cstddef>
#include <optional>

#include <eddy/runtime/config.hpp>

namespace eddy::detail {

/// The CPUs this process may use: its affinity mask, capped by a cgroup CPU quota (v2
/// cpu.max or v1 cpu.cfs_quota_us, rounded up). At least 1.
std::size_t available_cpus();

/// The worker count a Runtime starts: `configured` (validate_config has checked it), else
/// available_cpus(). No environment is read here: EDDY_WORKERS counts only through
/// RuntimeConfig::from_env (settings.cpp), like every other EDDY_* variable.
std::size_t resolve_workers(std::optional<std::size_t> configured);

inline constexpr std::size_t kMaxWorkers = RuntimeConfig::kMaxWorkers;

}  // namespace eddy::detail
