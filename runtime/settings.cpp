// runtime/settings.cpp: see settings.hpp.
#include "settings.hpp"

#include "hooks.hpp"

#include <pthread.h>

#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace eddy::detail {
namespace {

[[noreturn]] void reject(const char* var, std::string_view value, const std::string& accepted) {
    std::ostringstream msg;
    msg << "eddy: " << var << " must be " << accepted << ", got '" << value << "'";
    throw std::invalid_argument(msg.str());
}

[[noreturn]] void reject_field(const char* field, const std::string& accepted, const std::string& got) {
    throw std::invalid_argument("eddy: RuntimeConfig::" + std::string(field) + " must be " + accepted + ", got " + got);
}

std::string range(std::uint64_t min, std::uint64_t max) {
    return "from " + std::to_string(min) + " to " + std::to_string(max);
}

/// 65536 -> "64K", 1073741824 -> "1G", 1000 -> "1000".
std::string short_size(std::size_t n) {
    static constexpr char kSuffix[] = {'G', 'M', 'K'};
    for (int i = 0; i < 3; ++i) {
        const std::size_t unit = std::size_t{1} << (10 * (3 - i));
        if (n != 0 && n % unit == 0) return std::to_string(n / unit) + kSuffix[i];
    }
    return std::to_string(n);
}

std::string size_range(std::size_t min, std::size_t max) {
    return range(min, max) + " bytes (" + short_size(min) + " to " + short_size(max) + ")";
}

bool equals_nocase(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != b[i]) return false;
    return true;
}

/// Decimal digits only (from_chars takes no sign or blank for an unsigned type), no overflow.
bool parse_digits(std::string_view s, std::uint64_t& out) {
    const char* first = s.data();
    const char* last = first + s.size();
    auto [end, ec] = std::from_chars(first, last, out);
    return !s.empty() && ec == std::errc{} && end == last;
}

}  // namespace

std::uint64_t parse_count_env(const char* var, std::string_view value, std::uint64_t min, std::uint64_t max) {
    std::uint64_t n = 0;
    if (!parse_digits(value, n) || n < min || n > max) reject(var, value, "a whole number " + range(min, max));
    return n;
}

bool parse_bool_env(const char* var, std::string_view value) {
    if (value == "1" || equals_nocase(value, "true")) return true;
    if (value == "0" || equals_nocase(value, "false")) return false;
    reject(var, value, "0, 1, true or false");
}

std::size_t parse_size_env(const char* var, std::string_view value, std::size_t min, std::size_t max) {
    const std::string accepted = "a number of bytes " + size_range(min, max) + ", with an optional K, M or G suffix";
    std::string_view digits = value;
    unsigned shift = 0;
    if (!value.empty()) {
        switch (std::tolower(static_cast<unsigned char>(value.back()))) {
        case 'k':
            shift = 10;
            break;
        case 'm':
            shift = 20;
            break;
        case 'g':
            shift = 30;
            break;
        default:
            break;
        }
        if (shift != 0) digits.remove_suffix(1);
    }
    std::uint64_t n = 0;
    if (!parse_digits(digits, n) || n > (std::numeric_limits<std::uint64_t>::max() >> shift))
        reject(var, value, accepted);
    n <<= shift;
    if (n < min || n > max) reject(var, value, accepted);
    return static_cast<std::size_t>(n);
}

UnhandledExceptionPolicy parse_policy_env(const char* var, std::string_view value) {
    if (equals_nocase(value, "log")) return UnhandledExceptionPolicy::log;
    if (equals_nocase(value, "ignore")) return UnhandledExceptionPolicy::ignore;
    if (equals_nocase(value, "terminate")) return UnhandledExceptionPolicy::terminate;
    reject(var, value, "log, ignore or terminate");
}

IoDriver parse_driver_env(const char* var, std::string_view value) {
    if (equals_nocase(value, "auto")) return IoDriver::automatic;
    if (equals_nocase(value, "io_uring")) return IoDriver::io_uring;
    if (equals_nocase(value, "epoll")) return IoDriver::epoll;
    reject(var, value, "auto, io_uring or epoll");
}

ClockMode parse_clock_env(const char* var, std::string_view value) {
    if (equals_nocase(value, "real")) return ClockMode::real;
    if (equals_nocase(value, "paused")) return ClockMode::paused;
    if (equals_nocase(value, "manual")) return ClockMode::manual;
    reject(var, value, "real, paused or manual");
}

void validate_config(const RuntimeConfig& c) {
    if (c.workers && (*c.workers < 1 || *c.workers > RuntimeConfig::kMaxWorkers))
        reject_field("workers", range(1, RuntimeConfig::kMaxWorkers), std::to_string(*c.workers));
    if (c.clock != ClockMode::real && c.clock != ClockMode::paused && c.clock != ClockMode::manual)
        reject_field("clock", "real, paused or manual", std::to_string(static_cast<int>(c.clock)));
    if (c.ring_entries < 1 || c.ring_entries > RuntimeConfig::kMaxRingEntries)
        reject_field("ring_entries", range(1, RuntimeConfig::kMaxRingEntries), std::to_string(c.ring_entries));
    if (c.driver != IoDriver::automatic && c.driver != IoDriver::io_uring && c.driver != IoDriver::epoll)
        reject_field("driver", "automatic, io_uring or epoll", std::to_string(static_cast<int>(c.driver)));
    if (c.thread_name_prefix.empty() || c.thread_name_prefix.find('\0') != std::string::npos)
        reject_field("thread_name_prefix", "a non-empty string without NUL bytes", "'" + c.thread_name_prefix + "'");
    if (c.global_queue_interval < 1 || c.global_queue_interval > RuntimeConfig::kMaxGlobalQueueInterval)
        reject_field("global_queue_interval", range(1, RuntimeConfig::kMaxGlobalQueueInterval),
                     std::to_string(c.global_queue_interval));
    if (c.stack_size != 0 &&
        (c.stack_size < RuntimeConfig::kMinStackSize || c.stack_size > RuntimeConfig::kMaxStackSize))
        reject_field(
            "stack_size",
            "0 (the system's default) or " + size_range(RuntimeConfig::kMinStackSize, RuntimeConfig::kMaxStackSize),
            std::to_string(c.stack_size));
    if (c.slow_poll_threshold.count() < 0 || c.slow_poll_threshold > RuntimeConfig::kMaxSlowPollThreshold)
        reject_field("slow_poll_threshold", range(0, RuntimeConfig::kMaxSlowPollThreshold.count()) + " ms",
                     std::to_string(c.slow_poll_threshold.count()) + " ms");
    if (c.max_blocking_threads < 1 || c.max_blocking_threads > RuntimeConfig::kMaxBlockingThreads)
        reject_field("max_blocking_threads", range(1, RuntimeConfig::kMaxBlockingThreads),
                     std::to_string(c.max_blocking_threads));
    if (c.blocking_keep_alive.count() < 1 || c.blocking_keep_alive > RuntimeConfig::kMaxBlockingKeepAlive)
        reject_field("blocking_keep_alive", range(1, RuntimeConfig::kMaxBlockingKeepAlive.count()) + " ms",
                     std::to_string(c.blocking_keep_alive.count()) + " ms");
    if (c.blocking_shutdown_timeout.count() < 0 ||
        c.blocking_shutdown_timeout > RuntimeConfig::kMaxBlockingShutdownTimeout)
        reject_field("blocking_shutdown_timeout", range(0, RuntimeConfig::kMaxBlockingShutdownTimeout.count()) + " ms",
                     std::to_string(c.blocking_shutdown_timeout.count()) + " ms");
    if (c.unhandled_exception) {
        switch (*c.unhandled_exception) {
        case UnhandledExceptionPolicy::log:
        case UnhandledExceptionPolicy::ignore:
        case UnhandledExceptionPolicy::terminate:
            break;
        case UnhandledExceptionPolicy::callback:
            if (!c.on_unhandled_exception)
                reject_field("unhandled_exception", "callback only with an on_unhandled_exception",
                             "callback without one");
            break;
        default:
            reject_field("unhandled_exception", "log, ignore, terminate or callback",
                         std::to_string(static_cast<int>(*c.unhandled_exception)));
        }
    }
}

std::string thread_name(const RuntimeConfig& config, std::string_view role) {
    std::string name = config.thread_name_prefix;
    name += '-';
    name += role;
    if (name.size() > 15) name.resize(15);  // Linux: 16 bytes with the terminating NUL
    return name;
}

void name_this_thread(const std::string& name) noexcept { (void)pthread_setname_np(pthread_self(), name.c_str()); }

void run_thread_hook(const std::function<void()>& hook, const char* which) noexcept {
    if (hook) call_guarded(which, hook);
}

}  // namespace eddy::detail

namespace eddy {

RuntimeConfig RuntimeConfig::from_env(RuntimeConfig c) {
    using namespace detail;
    if (const char* v = std::getenv("EDDY_WORKERS")) c.workers = parse_count_env("EDDY_WORKERS", v, 1, kMaxWorkers);
    if (const char* v = std::getenv("EDDY_RING_ENTRIES"))
        c.ring_entries = static_cast<unsigned>(parse_count_env("EDDY_RING_ENTRIES", v, 1, kMaxRingEntries));
    if (const char* v = std::getenv("EDDY_DRIVER")) c.driver = parse_driver_env("EDDY_DRIVER", v);
    if (const char* v = std::getenv("EDDY_THREAD_NAME")) {
        if (*v == '\0') reject("EDDY_THREAD_NAME", v, "a non-empty thread name prefix");
        c.thread_name_prefix = v;
    }
    if (const char* v = std::getenv("EDDY_PIN_WORKERS")) c.pin_workers = parse_bool_env("EDDY_PIN_WORKERS", v);
    if (const char* v = std::getenv("EDDY_POLL_TIME_HISTOGRAM"))
        c.poll_time_histogram = parse_bool_env("EDDY_POLL_TIME_HISTOGRAM", v);
    if (const char* v = std::getenv("EDDY_IO_LATENCY_HISTOGRAM"))
        c.io_latency_histogram = parse_bool_env("EDDY_IO_LATENCY_HISTOGRAM", v);
    if (const char* v = std::getenv("EDDY_GLOBAL_QUEUE_INTERVAL"))
        c.global_queue_interval =
            static_cast<std::uint32_t>(parse_count_env("EDDY_GLOBAL_QUEUE_INTERVAL", v, 1, kMaxGlobalQueueInterval));
    if (const char* v = std::getenv("EDDY_STACK_SIZE")) {
        // 0 means the system's default, as for the field.
        c.stack_size =
            std::string_view(v) == "0" ? 0 : parse_size_env("EDDY_STACK_SIZE", v, kMinStackSize, kMaxStackSize);
    }
    if (const char* v = std::getenv("EDDY_UNHANDLED")) c.unhandled_exception = parse_policy_env("EDDY_UNHANDLED", v);
    if (const char* v = std::getenv("EDDY_SLOW_POLL_MS"))
        c.slow_poll_threshold = std::chrono::milliseconds(
            parse_count_env("EDDY_SLOW_POLL_MS", v, 0, static_cast<std::uint64_t>(kMaxSlowPollThreshold.count())));
    if (const char* v = std::getenv("EDDY_MAX_BLOCKING_THREADS"))
        c.max_blocking_threads = parse_count_env("EDDY_MAX_BLOCKING_THREADS", v, 1, kMaxBlockingThreads);
    if (const char* v = std::getenv("EDDY_BLOCKING_KEEP_ALIVE_MS"))
        c.blocking_keep_alive = std::chrono::milliseconds(parse_count_env(
            "EDDY_BLOCKING_KEEP_ALIVE_MS", v, 1, static_cast<std::uint64_t>(kMaxBlockingKeepAlive.count())));
    if (const char* v = std::getenv("EDDY_BLOCKING_SHUTDOWN_TIMEOUT_MS"))
        c.blocking_shutdown_timeout =
            std::chrono::milliseconds(parse_count_env("EDDY_BLOCKING_SHUTDOWN_TIMEOUT_MS", v, 0,
                                                      static_cast<std::uint64_t>(kMaxBlockingShutdownTimeout.count())));
    if (const char* v = std::getenv("EDDY_CLOCK")) c.clock = parse_clock_env("EDDY_CLOCK", v);
    return c;
}

}  // namespace eddy
