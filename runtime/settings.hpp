// runtime/settings.hpp: reading RuntimeConfig's environment variables, validating its
// fields, and what every eddy thread does first and last (name, hooks).
//
// One parser per kind of value; each throws std::invalid_argument whose message names the
// variable, quotes the value and states what is accepted.
#pragma once

#include "private.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <eddy/runtime/config.hpp>

namespace eddy::detail {

/// A whole number in [min, max] (decimal digits only: no sign, no blanks).
std::uint64_t parse_count_env(const char* var, std::string_view value, std::uint64_t min, std::uint64_t max);
/// 0, 1, true or false (any case).
bool parse_bool_env(const char* var, std::string_view value);
/// A number of bytes, with an optional K, M or G suffix (powers of 1024, any case), in
/// [min, max].
std::size_t parse_size_env(const char* var, std::string_view value, std::size_t min, std::size_t max);
/// log, ignore or terminate (any case).
UnhandledExceptionPolicy parse_policy_env(const char* var, std::string_view value);
/// real, paused or manual (any case).
ClockMode parse_clock_env(const char* var, std::string_view value);

/// Throws std::invalid_argument naming the first bad field of `config` and its range.
void validate_config(const RuntimeConfig& config);

/// The policy in effect (unset: callback if there is a callback, else log).
inline UnhandledExceptionPolicy effective_policy(const RuntimeConfig& config) noexcept {
    if (config.unhandled_exception) return *config.unhandled_exception;
    return config.on_unhandled_exception ? UnhandledExceptionPolicy::callback : UnhandledExceptionPolicy::log;
}

/// "<prefix>-<role>", cut to the 15 bytes a Linux thread name holds.
std::string thread_name(const RuntimeConfig& config, std::string_view role);
/// Names the calling thread.
void name_this_thread(const std::string& name) noexcept;
/// Runs on_thread_start / on_thread_stop (`which` names it), reporting an exception on stderr.
void run_thread_hook(const std::function<void()>& hook, const char* which) noexcept;

}  // namespace eddy::detail
