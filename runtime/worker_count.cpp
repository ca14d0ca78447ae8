// runtime/worker_count.cpp: see worker_count.hpp.
#include "worker_count.hpp"

#include <sched.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace eddy::detail {
namespace {

/// The cgroup v2 path of this process ("0::/some/path"), or "" when not on cgroup v2.
std::string cgroup_v2_path() {
    std::ifstream in("/proc/self/cgroup");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("0::", 0) == 0) return line.substr(3);
    return {};
}

/// ceil(quota / period) from a cgroup file pair, or 0 when unlimited or unreadable.
std::size_t quota_cpus() {
    const std::string rel = cgroup_v2_path();
    // v2: "<quota|max> <period>" in cpu.max, at our cgroup or (in a container) its root.
    for (const std::string& dir : {"/sys/fs/cgroup" + rel, std::string("/sys/fs/cgroup")}) {
        std::ifstream in(dir + "/cpu.max");
        std::string quota;
        long long period = 0;
        if (in >> quota >> period) {
            if (quota == "max" || period <= 0) return 0;
            const long long q = std::atoll(quota.c_str());
            return q > 0 ? static_cast<std::size_t>((q + period - 1) / period) : 0;
        }
    }
    // v1: cpu.cfs_quota_us (-1 when unlimited) and cpu.cfs_period_us.
    std::ifstream q("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
    std::ifstream p("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
    long long quota = -1, period = 0;
    if (q >> quota && p >> period && quota > 0 && period > 0)
        return static_cast<std::size_t>((quota + period - 1) / period);
    return 0;
}

}  // namespace

std::size_t available_cpus() {
    std::size_t n = 1;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = static_cast<std::size_t>(CPU_COUNT(&set));
    if (const std::size_t quota = quota_cpus(); quota > 0 && quota < n) n = quota;
    return n < 1 ? 1 : n;
}

std::size_t resolve_workers(std::optional<std::size_t> configured) {
    return configured ? *configured : available_cpus();
}

}  // namespace eddy::detail
