// benchmarks/bench_main.hpp: what every benchmark program shares: flags, the result line,
// the self-check failure path, and the completion counter of shared/bench/SPEC.md.
//
// Flags: --workers N (default: eddy's default, the CPUs available), the benchmark's own
// size flags and its choice flags (a word out of a list, e.g. fork_join's --shape fib|tree),
// as `--name value` or `--name=value`; an unknown flag or word is a usage error.
// Exit status: 0 ran and passed its self-check, 1 wrong result, 2 usage error.
#pragma once

#include <eddy/eddy.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

[[noreturn]] inline void fail(const char* bench, const std::string& msg) {
    std::fprintf(stderr, "bench=%s FAILED: %s\n", bench, msg.c_str());
    std::exit(1);
}

class Args {
public:
    /// `defaults`: every size flag this benchmark accepts, with its default. `choices`: every
    /// choice flag, with the words it accepts (the first is the default).
    Args(int argc, char** argv, const char* bench, std::map<std::string, std::uint64_t> defaults,
         std::map<std::string, std::vector<std::string>> choices = {})
        : bench_(bench), values_(std::move(defaults)), choices_(std::move(choices)) {
        for (const auto& [k, words] : choices_) chosen_[k] = words.at(0);
        for (int i = 1; i < argc; ++i) {
            std::string flag = argv[i];
            if (flag == "-h" || flag == "--help") usage(0);
            if (flag.rfind("--", 0) != 0) usage(2, "unexpected argument '" + flag + "'");
            flag = flag.substr(2);
            std::string value;
            if (auto eq = flag.find('='); eq != std::string::npos) {
                value = flag.substr(eq + 1);
                flag = flag.substr(0, eq);
            } else if (i + 1 < argc) {
                value = argv[++i];
            } else {
                usage(2, "flag --" + flag + " needs a value");
            }
            if (auto c = choices_.find(flag); c != choices_.end()) {
                bool known = false;
                for (const std::string& w : c->second) known = known || w == value;
                if (!known) usage(2, "--" + flag + ": unknown value '" + value + "'");
                chosen_[flag] = value;
                continue;
            }
            char* end = nullptr;
            const unsigned long long n = std::strtoull(value.c_str(), &end, 10);
            if (value.empty() || *end != '\0' || value[0] == '-')
                usage(2, "--" + flag + ": not a whole number: '" + value + "'");
            if (flag == "workers") {
                if (n == 0) usage(2, "--workers must be at least 1");
                workers_ = static_cast<std::size_t>(n);
            } else if (values_.count(flag) != 0) {
                values_[flag] = n;
            } else {
                usage(2, "unknown option --" + flag);
            }
        }
    }

    std::uint64_t get(const std::string& name) const { return values_.at(name); }
    /// The word given for choice flag `name` (or its default).
    const std::string& choice(const std::string& name) const { return chosen_.at(name); }

    /// The runtime's configuration. What observability costs (docs/guide/11-operating.md,
    /// "Observability"): EDDY_BENCH_POLL_HOOK=1 installs a trivial on_poll_start (a
    /// thread-local count), EDDY_POLL_TIME_HISTOGRAM=1 the poll timer.
    eddy::RuntimeConfig config() const {
        eddy::RuntimeConfig c{.workers = workers_};
        if (env_is_one("EDDY_BENCH_POLL_HOOK")) c.on_poll_start = [](std::size_t) { ++polls_seen(); };
        c.poll_time_histogram = env_is_one("EDDY_POLL_TIME_HISTOGRAM");
        return c;
    }

private:
    static bool env_is_one(const char* name) {
        const char* v = std::getenv(name);
        return v != nullptr && std::strcmp(v, "1") == 0;
    }
    static std::uint64_t& polls_seen() {
        thread_local std::uint64_t n = 0;
        return n;
    }

    [[noreturn]] void usage(int status, const std::string& why = {}) const {
        if (!why.empty()) std::fprintf(stderr, "%s: %s\n", bench_, why.c_str());
        std::fprintf(status == 0 ? stdout : stderr, "usage: %s [--workers N]", bench_);
        for (const auto& [k, v] : values_)
            std::fprintf(status == 0 ? stdout : stderr, " [--%s %llu]", k.c_str(), static_cast<unsigned long long>(v));
        for (const auto& [k, words] : choices_) {
            std::string list;
            for (const std::string& w : words) list += (list.empty() ? "" : "|") + w;
            std::fprintf(status == 0 ? stdout : stderr, " [--%s %s]", k.c_str(), list.c_str());
        }
        std::fprintf(status == 0 ? stdout : stderr, "\n");
        std::exit(status);
    }

    const char* bench_;
    std::map<std::string, std::uint64_t> values_;
    std::map<std::string, std::vector<std::string>> choices_;
    std::map<std::string, std::string> chosen_;
    std::optional<std::size_t> workers_;
};

/// The one result line of shared/bench/SPEC.md.
inline void report(const char* bench, std::size_t workers, std::uint64_t ops, double secs) {
    const auto rate = secs > 0 ? static_cast<unsigned long long>(std::llround(static_cast<double>(ops) / secs)) : 0ull;
    std::printf("bench=%s runtime=eddy workers=%zu ops=%llu secs=%.4f rate=%llu\n", bench, workers,
                static_cast<unsigned long long>(ops), secs, rate);
    std::fflush(stdout);
}

/// N tasks count down; the one that brings the count to N sets `done` (SPEC: "the one that
/// reaches N signals completion"). Acq_rel so the waiter sees what every task did.
struct Completion {
    explicit Completion(std::uint64_t n) : target(n) {}
    void done_one() noexcept {
        if (count.fetch_add(1, std::memory_order_acq_rel) + 1 == target) done.set();
    }
    std::atomic<std::uint64_t> count{0};
    const std::uint64_t target;
    eddy::Event done;
};

}  // namespace bench
