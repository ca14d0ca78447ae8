// tests/runtime/config_test.cpp: RuntimeConfig (eddy/runtime/config.hpp): from_env() reads and
// validates every EDDY_* variable; the Runtime constructor validates every field; thread
// names, CPU pinning, stack size, start/stop hooks, the global queue interval and the
// unhandled-exception policies take effect.
//
// The environment is changed only through CleanEnv/ScopedEnv (restored on the way out), on
// this thread, with no Runtime reading it concurrently (doctest runs cases one at a time).
#include <doctest/doctest.h>

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <eddy/eddy.hpp>

#include "settings.hpp"
#include "support/scoped_env.hpp"
#include "support/stderr_capture.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::UnhandledExceptionPolicy;

namespace {

using eddy::test::ScopedEnv;
using eddy::test::StderrCapture;

constexpr const char* kAllVariables[] = {"EDDY_WORKERS",       "EDDY_RING_ENTRIES",          "EDDY_THREAD_NAME",
                                         "EDDY_PIN_WORKERS",   "EDDY_GLOBAL_QUEUE_INTERVAL", "EDDY_STACK_SIZE",
                                         "EDDY_UNHANDLED",     "EDDY_SLOW_POLL_MS"};

/// Unsets every EDDY_* variable RuntimeConfig reads, for one scope.
class CleanEnv {
public:
    CleanEnv() {
        for (const char* v : kAllVariables) vars_.push_back(std::make_unique<ScopedEnv>(v, nullptr));
    }

private:
    std::vector<std::unique_ptr<ScopedEnv>> vars_;
};

/// The message of the std::invalid_argument `f()` throws, or nullopt if it throws nothing.
template <class F>
std::optional<std::string> invalid_argument_of(F f) {
    try {
        f();
    } catch (const std::invalid_argument& e) {
        return std::string(e.what());
    }
    return std::nullopt;
}

/// from_env()'s error with `var` set to `value`, or nullopt.
std::optional<std::string> env_error(const char* var, const char* value) {
    CleanEnv clean;
    ScopedEnv env(var, value);
    return invalid_argument_of([] { (void)RuntimeConfig::from_env(); });
}

/// from_env() with `var` set to `value` (and nothing else set).
RuntimeConfig from_env_with(const char* var, const char* value) {
    CleanEnv clean;
    ScopedEnv env(var, value);
    return RuntimeConfig::from_env();
}

/// Checks that every value in `bad` is rejected with a message naming `var`, quoting the
/// value and containing `accepted` (the range).
void check_rejected(const char* var, std::initializer_list<const char*> bad, const std::string& accepted) {
    for (const char* value : bad) {
        CAPTURE(var);
        CAPTURE(value);
        const std::optional<std::string> message = env_error(var, value);
        REQUIRE(message.has_value());
        CAPTURE(*message);
        CHECK(message->find(var) != std::string::npos);
        std::string quoted(1, '\'');  // (not "'" + std::string: g++ 12's -Wrestrict false positive)
        quoted.append(value).push_back('\'');
        CHECK(message->find(quoted) != std::string::npos);
        CHECK(message->find(accepted) != std::string::npos);
    }
}

/// The Runtime constructor's error for `config`, or nullopt.
std::optional<std::string> construction_error(const RuntimeConfig& config) {
    CleanEnv clean;
    return invalid_argument_of([&] { Runtime rt(config); });
}

void check_field_rejected(const RuntimeConfig& config, const char* field, const std::string& accepted) {
    CAPTURE(field);
    const std::optional<std::string> message = construction_error(config);
    REQUIRE(message.has_value());
    CAPTURE(*message);
    CHECK(message->find(std::string("RuntimeConfig::") + field) != std::string::npos);
    CHECK(message->find(accepted) != std::string::npos);
}

std::string read_line(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

/// The calling thread's name.
std::string this_thread_name() {
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof name);
    return name;
}

/// name -> thread ids, for every thread of this process (/proc/self/task/*/comm).
std::multimap<std::string, pid_t> threads_by_name() {
    std::multimap<std::string, pid_t> out;
    DIR* dir = opendir("/proc/self/task");
    REQUIRE(dir != nullptr);
    while (dirent* d = readdir(dir)) {
        if (d->d_name[0] == '.') continue;
        const std::string tid = d->d_name;
        out.emplace(read_line("/proc/self/task/" + tid + "/comm"), static_cast<pid_t>(std::stol(tid)));
    }
    closedir(dir);
    return out;
}

std::vector<int> cpus_of(pid_t tid) {
    cpu_set_t set;
    CPU_ZERO(&set);
    REQUIRE(sched_getaffinity(tid, sizeof set, &set) == 0);
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) cpus.push_back(c);
    return cpus;
}

/// The calling thread's stack size (pthread_getattr_np).
std::size_t this_thread_stack_size() {
    pthread_attr_t attr;
    REQUIRE(pthread_getattr_np(pthread_self(), &attr) == 0);
    void* addr = nullptr;
    std::size_t size = 0;
    pthread_attr_getstack(&attr, &addr, &size);
    pthread_attr_destroy(&attr);
    return size;
}

struct Boom : std::runtime_error {
    using std::runtime_error::runtime_error;
};

eddy::Task<void> throw_after(std::latch& started, const char* what) {
    started.count_down();
    throw Boom(what);
    co_return;
}

/// Runs a task that throws on a runtime built from `config`, its JoinHandle dropped at once,
/// and shuts the runtime down once the task has run (so its report has happened).
void throw_detached(RuntimeConfig config, const char* what = "boom-detached") {
    Runtime rt(std::move(config));
    std::latch started(1);
    rt.spawn(throw_after(started, what)).detach();
    started.wait();
}  // shutdown joins the worker after the task's step, report included

/// Counts calls of an on_unhandled_exception hook.
struct Calls {
    std::atomic<int> n{0};
    std::function<void(std::exception_ptr)> hook() {
        return [this](std::exception_ptr) { n.fetch_add(1); };
    }
};

} // namespace

TEST_SUITE("runtime/config") {

// ---------------------------------------------------------------------------------------------
// from_env: bad values

TEST_CASE("EDDY_WORKERS: every bad value is rejected, naming the variable, the value and the range") {
    check_rejected("EDDY_WORKERS", {"", "0", "-1", "abc", "1025", " 4", "4 ", "+4", "4x", "1.5", "99999999999999999999999"},
                   "from 1 to 1024");
}

TEST_CASE("EDDY_RING_ENTRIES: every bad value is rejected") {
    check_rejected("EDDY_RING_ENTRIES", {"", "0", "-1", "x", "32769", "1k", "4096 ", "99999999999999999999999"},
                   "from 1 to 32768");
}

TEST_CASE("EDDY_THREAD_NAME: empty is rejected") { check_rejected("EDDY_THREAD_NAME", {""}, "non-empty"); }

TEST_CASE("EDDY_PIN_WORKERS: every bad value is rejected") {
    check_rejected("EDDY_PIN_WORKERS", {"", "2", "-1", "yes", "no", "on", "truee", " 1", "1 ", "01"},
                   "0, 1, true or false");
}

TEST_CASE("EDDY_GLOBAL_QUEUE_INTERVAL: every bad value is rejected") {
    check_rejected("EDDY_GLOBAL_QUEUE_INTERVAL", {"", "0", "-5", "ten", "1000001", "61x", "6.1", "99999999999999999999999"},
                   "from 1 to 1000000");
}

TEST_CASE("EDDY_STACK_SIZE: every bad value is rejected") {
    check_rejected("EDDY_STACK_SIZE",
                   {"", "00", "0K", "-1", "-64K", "abc", "1000", "65535", "63K", "2G", "1025M", "1073741825", "1T", "64KB",
                    "64KiB", "K", "1.5M", " 64K", "64K ", "99999999999999999999G", "17179869184G"},
                   "from 65536 to 1073741824 bytes (64K to 1G)");
}

TEST_CASE("EDDY_UNHANDLED: every bad value is rejected") {
    check_rejected("EDDY_UNHANDLED", {"", "callback", "abort", "logs", " log", "log ", "0"}, "log, ignore or terminate");
}

// ---------------------------------------------------------------------------------------------
// from_env: good values

TEST_CASE("from_env with no variable set gives the defaults") {
    CleanEnv clean;
    const RuntimeConfig c = RuntimeConfig::from_env();
    CHECK_FALSE(c.workers.has_value());
    CHECK(c.ring_entries == 1024);
    CHECK(c.thread_name_prefix == "eddy");
    CHECK_FALSE(c.pin_workers);
    CHECK(c.global_queue_interval == 61);
    CHECK(c.stack_size == 0);
    CHECK_FALSE(c.unhandled_exception.has_value());
    CHECK_FALSE(c.on_thread_start);
    CHECK_FALSE(c.on_unhandled_exception);
}

TEST_CASE("from_env reads every variable") {
    CHECK(from_env_with("EDDY_WORKERS", "3").workers == std::optional<std::size_t>(3));
    CHECK(from_env_with("EDDY_WORKERS", "1024").workers == std::optional<std::size_t>(1024));
    CHECK(from_env_with("EDDY_RING_ENTRIES", "1").ring_entries == 1);
    CHECK(from_env_with("EDDY_RING_ENTRIES", "32768").ring_entries == 32768);
    CHECK(from_env_with("EDDY_THREAD_NAME", "svc").thread_name_prefix == "svc");
    for (const char* yes : {"1", "true", "TRUE", "True"}) CHECK(from_env_with("EDDY_PIN_WORKERS", yes).pin_workers);
    for (const char* no : {"0", "false", "FALSE"}) CHECK_FALSE(from_env_with("EDDY_PIN_WORKERS", no).pin_workers);
    CHECK(from_env_with("EDDY_GLOBAL_QUEUE_INTERVAL", "1").global_queue_interval == 1);
    CHECK(from_env_with("EDDY_GLOBAL_QUEUE_INTERVAL", "31").global_queue_interval == 31);
    CHECK(from_env_with("EDDY_GLOBAL_QUEUE_INTERVAL", "1000000").global_queue_interval == 1000000);
    CHECK(from_env_with("EDDY_STACK_SIZE", "0").stack_size == 0);  // the system's default, as for the field
    CHECK(from_env_with("EDDY_STACK_SIZE", "65536").stack_size == 65536);
    CHECK(from_env_with("EDDY_STACK_SIZE", "64K").stack_size == 65536);
    CHECK(from_env_with("EDDY_STACK_SIZE", "64k").stack_size == 65536);
    CHECK(from_env_with("EDDY_STACK_SIZE", "100000").stack_size == 100000);
    CHECK(from_env_with("EDDY_STACK_SIZE", "2M").stack_size == 2u << 20);
    CHECK(from_env_with("EDDY_STACK_SIZE", "512m").stack_size == 512u << 20);
    CHECK(from_env_with("EDDY_STACK_SIZE", "1G").stack_size == 1u << 30);
    CHECK(from_env_with("EDDY_STACK_SIZE", "1073741824").stack_size == 1u << 30);
    CHECK(from_env_with("EDDY_UNHANDLED", "log").unhandled_exception == UnhandledExceptionPolicy::log);
    CHECK(from_env_with("EDDY_UNHANDLED", "ignore").unhandled_exception == UnhandledExceptionPolicy::ignore);
    CHECK(from_env_with("EDDY_UNHANDLED", "IGNORE").unhandled_exception == UnhandledExceptionPolicy::ignore);
    CHECK(from_env_with("EDDY_UNHANDLED", "terminate").unhandled_exception == UnhandledExceptionPolicy::terminate);
}

TEST_CASE("from_env(base) keeps what no variable sets, and the variables win over base") {
    CleanEnv clean;
    ScopedEnv ring("EDDY_RING_ENTRIES", "64");
    ScopedEnv pin("EDDY_PIN_WORKERS", "true");
    int started = 0;
    const RuntimeConfig c = RuntimeConfig::from_env(RuntimeConfig{.workers = 2,
                                                                  .ring_entries = 8,
                                                                  .thread_name_prefix = "base",
                                                                  .global_queue_interval = 7,
                                                                  .on_thread_start = [&] { ++started; }});
    CHECK(c.workers == std::optional<std::size_t>(2));
    CHECK(c.ring_entries == 64);
    CHECK(c.pin_workers);
    CHECK(c.thread_name_prefix == "base");
    CHECK(c.global_queue_interval == 7);
    REQUIRE(c.on_thread_start);
    c.on_thread_start();
    CHECK(started == 1);
}

TEST_CASE("a Runtime built from from_env() uses the variables") {
    CleanEnv clean;
    ScopedEnv workers("EDDY_WORKERS", "2");
    ScopedEnv name("EDDY_THREAD_NAME", "envt");
    Runtime rt(RuntimeConfig::from_env());
    CHECK(rt.workers() == 2);
    const auto threads = threads_by_name();
    CHECK(threads.count("envt-worker-0") == 1);
    CHECK(threads.count("envt-worker-1") == 1);
    CHECK(threads.count("envt-reactor") == 1);
}

// The precedence rule (config.hpp): the program's values win; the environment counts only
// through from_env(base), where the variables that are set win over base.

TEST_CASE("a plain Runtime: its explicit values win, EDDY_WORKERS and the others are not read") {
    CleanEnv clean;
    ScopedEnv workers("EDDY_WORKERS", "3");
    ScopedEnv name("EDDY_THREAD_NAME", "ignored");
    Runtime rt(RuntimeConfig{.workers = 1, .thread_name_prefix = "plain"});
    CHECK(rt.workers() == 1);
    const auto threads = threads_by_name();
    CHECK(threads.count("plain-worker-0") == 1);
    CHECK(threads.count("plain-worker-1") == 0);
    CHECK(threads.count("ignored-reactor") == 0);
}

TEST_CASE("from_env(base) with EDDY_WORKERS set: the variable wins over base.workers") {
    CleanEnv clean;
    ScopedEnv workers("EDDY_WORKERS", "3");
    Runtime rt(RuntimeConfig::from_env(RuntimeConfig{.workers = 1}));
    CHECK(rt.workers() == 3);
}

TEST_CASE("a value set on from_env()'s result wins again (a command-line flag over the environment)") {
    CleanEnv clean;
    ScopedEnv workers("EDDY_WORKERS", "3");
    RuntimeConfig c = RuntimeConfig::from_env();
    REQUIRE(c.workers == std::optional<std::size_t>(3));
    c.workers = 2;
    Runtime rt(std::move(c));
    CHECK(rt.workers() == 2);
}

TEST_CASE("a default Runtime with EDDY_WORKERS set does not read it, not even to reject it") {
    CleanEnv clean;
    const std::size_t cpus = Runtime().workers();  // one per CPU this process may use
    for (const char* value : {"abc", "0", "1025", "1"}) {
        CAPTURE(value);
        ScopedEnv workers("EDDY_WORKERS", value);
        Runtime rt;  // no std::invalid_argument for the bad values: nothing reads them
        CHECK(rt.workers() == cpus);
    }
}

// ---------------------------------------------------------------------------------------------
// Validation of the fields by the Runtime constructor

TEST_CASE("the Runtime constructor rejects every bad field, naming it and its range") {
    check_field_rejected(RuntimeConfig{.workers = 0}, "workers", "from 1 to 1024");
    check_field_rejected(RuntimeConfig{.workers = 1025}, "workers", "from 1 to 1024");
    check_field_rejected(RuntimeConfig{.workers = 1, .ring_entries = 0}, "ring_entries", "from 1 to 32768");
    check_field_rejected(RuntimeConfig{.workers = 1, .ring_entries = 32769}, "ring_entries", "from 1 to 32768");
    check_field_rejected(RuntimeConfig{.workers = 1, .thread_name_prefix = ""}, "thread_name_prefix", "non-empty");
    check_field_rejected(RuntimeConfig{.workers = 1, .thread_name_prefix = std::string("a\0b", 3)},
                         "thread_name_prefix", "non-empty");
    check_field_rejected(RuntimeConfig{.workers = 1, .global_queue_interval = 0}, "global_queue_interval",
                         "from 1 to 1000000");
    check_field_rejected(RuntimeConfig{.workers = 1, .global_queue_interval = 1000001}, "global_queue_interval",
                         "from 1 to 1000000");
    for (std::size_t bad : {std::size_t{1}, std::size_t{65535}, (std::size_t{1} << 30) + 1, ~std::size_t{0}}) {
        CAPTURE(bad);
        check_field_rejected(RuntimeConfig{.workers = 1, .stack_size = bad}, "stack_size", "64K to 1G");
    }
    check_field_rejected(RuntimeConfig{.workers = 1, .unhandled_exception = UnhandledExceptionPolicy::callback},
                         "unhandled_exception", "on_unhandled_exception");
    check_field_rejected(RuntimeConfig{.workers = 1, .unhandled_exception = static_cast<UnhandledExceptionPolicy>(42)},
                         "unhandled_exception", "log, ignore, terminate or callback");
}

TEST_CASE("the ends of every range are accepted") {
    CleanEnv clean;
    for (std::uint32_t interval : {1u, 1000000u}) {
        Runtime rt(RuntimeConfig{.workers = 1, .global_queue_interval = interval});
        CHECK(rt.block_on([]() -> eddy::Task<int> { co_return 5; }()) == 5);
    }
    for (std::size_t size : {RuntimeConfig::kMinStackSize, RuntimeConfig::kMaxStackSize}) {
        Runtime rt(RuntimeConfig{.workers = 1, .stack_size = size});
        CHECK(rt.block_on([]() -> eddy::Task<int> { co_return 6; }()) == 6);
    }
}

// ---------------------------------------------------------------------------------------------
// Thread names, pinning, stack size, hooks

TEST_CASE("threads are named <prefix>-worker-N and <prefix>-reactor in /proc/self/task/*/comm") {
    CleanEnv clean;
    {
        Runtime rt(RuntimeConfig{.workers = 3});
        const auto threads = threads_by_name();
        for (const char* name : {"eddy-worker-0", "eddy-worker-1", "eddy-worker-2", "eddy-reactor"}) {
            CAPTURE(name);
            CHECK(threads.count(name) == 1);
        }
    }
    {
        Runtime rt(RuntimeConfig{.workers = 2, .thread_name_prefix = "cfgt"});
        const auto threads = threads_by_name();
        CHECK(threads.count("cfgt-worker-0") == 1);
        CHECK(threads.count("cfgt-worker-1") == 1);
        CHECK(threads.count("cfgt-reactor") == 1);
        CHECK(threads.count("eddy-reactor") == 0);  // the previous runtime's threads are gone
        CHECK(rt.block_on([]() -> eddy::Task<std::string> {
                  co_return this_thread_name();
              }()).rfind("cfgt-worker-", 0) == 0);
    }
}

TEST_CASE("a long prefix is cut to the 15 bytes Linux keeps") {
    CleanEnv clean;
    CHECK(eddy::detail::thread_name(RuntimeConfig{.thread_name_prefix = "averyverylongprefix"}, "worker-0") ==
          "averyverylongpr");
    CHECK(eddy::detail::thread_name(RuntimeConfig{.thread_name_prefix = "svc"}, "worker-1023") == "svc-worker-1023");
    Runtime rt(RuntimeConfig{.workers = 2, .thread_name_prefix = "averyverylongprefix"});
    CHECK(threads_by_name().count("averyverylongpr") == 3);  // two workers and the reactor
}

TEST_CASE("pin_workers pins worker i to the i-th allowed CPU, round robin; the reactor is not pinned") {
    CleanEnv clean;
    const std::vector<int> allowed = cpus_of(0);
    REQUIRE(!allowed.empty());
    const std::size_t workers = std::min<std::size_t>(allowed.size() + 1, 5);  // wraps around once
    Runtime rt(RuntimeConfig{.workers = workers, .thread_name_prefix = "pin", .pin_workers = true});
    const auto threads = threads_by_name();
    for (std::size_t i = 0; i < workers; ++i) {
        CAPTURE(i);
        auto it = threads.find("pin-worker-" + std::to_string(i));
        REQUIRE(it != threads.end());
        CHECK(cpus_of(it->second) == std::vector<int>{allowed[i % allowed.size()]});
    }
    auto reactor = threads.find("pin-reactor");
    REQUIRE(reactor != threads.end());
    CHECK(cpus_of(reactor->second) == allowed);

    // From inside a task: the worker it runs on is pinned to its CPU.
    struct Seen {
        std::size_t index;
        std::vector<int> cpus;
    };
    const Seen seen = rt.block_on([]() -> eddy::Task<Seen> {
        co_return Seen{eddy::this_worker::index().value(), cpus_of(0)};
    }());
    CHECK(seen.cpus == std::vector<int>{allowed[seen.index % allowed.size()]});
}

TEST_CASE("without pin_workers the workers keep the whole affinity mask") {
    CleanEnv clean;
    const std::vector<int> allowed = cpus_of(0);
    Runtime rt(RuntimeConfig{.workers = 2, .thread_name_prefix = "nopin"});
    const auto threads = threads_by_name();
    for (const char* name : {"nopin-worker-0", "nopin-worker-1"}) {
        auto it = threads.find(name);
        REQUIRE(it != threads.end());
        CHECK(cpus_of(it->second) == allowed);
    }
}

TEST_CASE("stack_size sets the workers' stack size") {
    CleanEnv clean;
    // At least the size asked for: glibc may hand out a cached stack up to four times as big
    // (an 8 MiB stack of an earlier thread for 3 MiB), so these are chosen below 2 MiB, each
    // more than four times the one before.
    for (std::size_t requested : {std::size_t{64} << 10, std::size_t{300} << 10, (std::size_t{1} << 20) + 1}) {
        CAPTURE(requested);
        std::mutex mutex;
        std::map<std::string, std::size_t> sizes;  // thread name -> stack size, from the start hook
        {
            Runtime rt(RuntimeConfig{.workers = 2, .thread_name_prefix = "stk", .stack_size = requested,
                                     .on_thread_start = [&] {
                                         std::lock_guard lock(mutex);
                                         sizes[this_thread_name()] = this_thread_stack_size();
                                     }});
            const std::size_t in_task = rt.block_on([]() -> eddy::Task<std::size_t> {
                co_return this_thread_stack_size();
            }());
            CHECK(in_task >= requested);
            CHECK(in_task <= 4 * requested + (64u << 10));
        }
        REQUIRE(sizes.size() == 3);
        for (const char* name : {"stk-worker-0", "stk-worker-1"}) {
            CAPTURE(name);
            CHECK(sizes[name] >= requested);
            CHECK(sizes[name] <= 4 * requested + (64u << 10));
        }
    }
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define EDDY_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define EDDY_TEST_SANITIZED 1
#endif
#endif

TEST_CASE("a worker thread that cannot start: std::system_error, and no thread is left running") {
#ifdef EDDY_TEST_SANITIZED
    MESSAGE("skipped: the sanitizers' shadow memory does not fit under an RLIMIT_AS");
#else
    // In a child: an address-space limit that a 1 GiB worker stack cannot fit under.
    CleanEnv clean;
    std::fflush(nullptr);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        ::signal(SIGABRT, SIG_DFL);
        std::ifstream status("/proc/self/status");
        std::string line;
        long vm_kib = -1;
        while (std::getline(status, line))
            if (line.rfind("VmSize:", 0) == 0) vm_kib = std::stol(line.substr(7));
        if (vm_kib < 0) ::_exit(10);
        const rlim_t limit = static_cast<rlim_t>(vm_kib) * 1024 + (rlim_t{256} << 20);
        const rlimit rl{limit, limit};
        if (::setrlimit(RLIMIT_AS, &rl) != 0) ::_exit(11);
        try {
            Runtime rt(RuntimeConfig{.workers = 2, .stack_size = RuntimeConfig::kMaxStackSize});
            ::_exit(12);  // started anyway
        } catch (const std::system_error& e) {
            if (std::string(e.what()).find("worker thread") == std::string::npos) ::_exit(13);
        } catch (...) {
            ::_exit(14);
        }
        std::size_t tasks = 0;
        if (DIR* dir = opendir("/proc/self/task")) {
            while (dirent* d = readdir(dir))
                if (d->d_name[0] != '.') ++tasks;
            closedir(dir);
        }
        ::_exit(tasks == 1 ? 0 : 15);  // the reactor was started and joined again
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
#endif
}

TEST_CASE("on_thread_start and on_thread_stop run once on every worker and on the reactor, on that thread") {
    CleanEnv clean;
    std::mutex mutex;
    std::multiset<std::string> started, stopped;  // thread names
    std::multiset<pid_t> start_tids, stop_tids;
    std::atomic<int> live{0};
    {
        Runtime rt(RuntimeConfig{.workers = 3,
                                 .thread_name_prefix = "hook",
                                 .on_thread_start =
                                     [&] {
                                         live.fetch_add(1);
                                         std::lock_guard lock(mutex);
                                         started.insert(this_thread_name());
                                         start_tids.insert(static_cast<pid_t>(::syscall(SYS_gettid)));
                                     },
                                 .on_thread_stop =
                                     [&] {
                                         live.fetch_sub(1);
                                         std::lock_guard lock(mutex);
                                         stopped.insert(this_thread_name());
                                         stop_tids.insert(static_cast<pid_t>(::syscall(SYS_gettid)));
                                     }});
        CHECK(rt.block_on([]() -> eddy::Task<int> { co_return 1; }()) == 1);
        std::lock_guard lock(mutex);
        CHECK(stopped.empty());
    }
    const std::multiset<std::string> expected{"hook-worker-0", "hook-worker-1", "hook-worker-2", "hook-reactor"};
    CHECK(started == expected);  // named before the hook ran
    CHECK(stopped == expected);
    CHECK(start_tids == stop_tids);
    CHECK(std::set<pid_t>(start_tids.begin(), start_tids.end()).size() == 4);
    CHECK(live.load() == 0);
}

TEST_CASE("a hook that throws is reported on stderr and the runtime works on") {
    CleanEnv clean;
    StderrCapture capture;
    {
        Runtime rt(RuntimeConfig{.workers = 2,
                                 .on_thread_start = [] { throw std::runtime_error("start-hook-failed"); },
                                 .on_thread_stop = [] { throw 7; }});
        CHECK(rt.block_on([]() -> eddy::Task<int> { co_return 3; }()) == 3);
    }
    const std::string err = capture.finish();
    CHECK(err.find("on_thread_start threw (ignored): start-hook-failed") != std::string::npos);
    CHECK(err.find("on_thread_stop threw (ignored; not a std::exception)") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// The global queue interval

namespace {
/// One worker runs a chain of spawns (each link runs next through the LIFO slot, so the worker
/// never runs dry). Link kPushAt has a plain thread spawn a marker task (to the global queue)
/// and waits for it; the marker must then run within global_queue_interval turns.
struct Chain {
    static constexpr int kPushAt = 10;
    Runtime* rt = nullptr;
    int cap = 0;
    std::atomic<int> links{0};
    std::atomic<int> links_at_marker{-1};
    std::atomic<bool> marker_ran{false};
    std::atomic<bool> done{false};
    std::optional<eddy::JoinHandle<void>> marker_handle;
};

eddy::Task<void> marker(Chain& c) {
    c.links_at_marker.store(c.links.load());
    c.marker_ran.store(true);
    co_return;
}

eddy::Task<void> link(Chain& c) {
    if (c.marker_ran.load() || c.links.load() >= c.cap) {
        c.done.store(true);
        c.done.notify_all();
        co_return;
    }
    if (c.links.fetch_add(1) + 1 == Chain::kPushAt)
        std::thread([&c] { c.marker_handle.emplace(c.rt->spawn(marker(c))); }).join();
    eddy::spawn(link(c)).detach();
}

int links_after_push(std::optional<std::uint32_t> interval) {
    RuntimeConfig config{.workers = 1};
    if (interval) config.global_queue_interval = *interval;
    Runtime rt(std::move(config));
    Chain c;
    c.rt = &rt;
    c.cap = Chain::kPushAt + static_cast<int>(interval.value_or(61)) + 100;
    rt.block_on(link(c));
    c.done.wait(false);
    c.marker_handle.reset();
    return c.links_at_marker.load() - Chain::kPushAt;
}
} // namespace

TEST_CASE("global_queue_interval bounds how long a queued task waits behind a busy worker") {
    CleanEnv clean;
    for (std::optional<std::uint32_t> interval : {std::optional<std::uint32_t>(1), std::optional<std::uint32_t>(7),
                                                  std::optional<std::uint32_t>(), std::optional<std::uint32_t>(200)}) {
        CAPTURE(interval.value_or(0));
        const int links = links_after_push(interval);
        CHECK(links >= 0);  // the marker ran after it was pushed, and before the chain gave up
        CHECK(links <= static_cast<int>(interval.value_or(61)));
    }
}

// ---------------------------------------------------------------------------------------------
// Unhandled-exception policies

TEST_CASE("policy log (the default without a callback) prints one line on stderr") {
    CleanEnv clean;
    for (std::optional<UnhandledExceptionPolicy> policy :
         {std::optional<UnhandledExceptionPolicy>(), std::optional(UnhandledExceptionPolicy::log)}) {
        StderrCapture capture;
        throw_detached(RuntimeConfig{.workers = 1, .unhandled_exception = policy});
        const std::string err = capture.finish();
        CHECK(err.find("exception escaped a detached task: boom-detached") != std::string::npos);
    }
}

TEST_CASE("policy log wins over a callback that is set") {
    CleanEnv clean;
    Calls calls;
    StderrCapture capture;
    throw_detached(RuntimeConfig{.workers = 1, .unhandled_exception = UnhandledExceptionPolicy::log,
                                 .on_unhandled_exception = calls.hook()});
    CHECK(capture.finish().find("boom-detached") != std::string::npos);
    CHECK(calls.n.load() == 0);
}

TEST_CASE("policy ignore prints nothing and calls nothing") {
    CleanEnv clean;
    Calls calls;
    StderrCapture capture;
    throw_detached(RuntimeConfig{.workers = 1, .unhandled_exception = UnhandledExceptionPolicy::ignore,
                                 .on_unhandled_exception = calls.hook()});
    CHECK(capture.finish().find("boom-detached") == std::string::npos);
    CHECK(calls.n.load() == 0);
}

TEST_CASE("EDDY_UNHANDLED=ignore through from_env silences the report") {
    CleanEnv clean;
    ScopedEnv policy("EDDY_UNHANDLED", "ignore");
    StderrCapture capture;
    RuntimeConfig config = RuntimeConfig::from_env({.workers = 1});
    throw_detached(std::move(config));
    CHECK(capture.finish().find("boom-detached") == std::string::npos);
}

TEST_CASE("policy callback, and a callback with the policy left unset, call on_unhandled_exception once") {
    CleanEnv clean;
    for (std::optional<UnhandledExceptionPolicy> policy :
         {std::optional<UnhandledExceptionPolicy>(), std::optional(UnhandledExceptionPolicy::callback)}) {
        Calls calls;
        StderrCapture capture;
        throw_detached(RuntimeConfig{.workers = 1, .unhandled_exception = policy, .on_unhandled_exception = calls.hook()});
        CHECK(calls.n.load() == 1);
        CHECK(capture.finish().find("boom-detached") == std::string::npos);
    }
}

TEST_CASE("the policy applies to a finished task whose handle is dropped unawaited") {
    CleanEnv clean;
    for (UnhandledExceptionPolicy policy : {UnhandledExceptionPolicy::callback, UnhandledExceptionPolicy::ignore}) {
        Calls calls;
        Runtime rt(RuntimeConfig{.workers = 1, .unhandled_exception = policy, .on_unhandled_exception = calls.hook()});
        std::latch started(1);
        {
            eddy::JoinHandle<void> h = rt.spawn(throw_after(started, "boom-unobserved"));
            while (!h.is_finished()) sched_yield();
        }  // dropped here, finished and never awaited
        CHECK(calls.n.load() == (policy == UnhandledExceptionPolicy::callback ? 1 : 0));
    }
}

TEST_CASE("policy terminate aborts the process (in a child)") {
    CleanEnv clean;
    std::FILE* err = std::tmpfile();
    REQUIRE(err != nullptr);
    std::fflush(nullptr);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        ::signal(SIGABRT, SIG_DFL);  // doctest's crash handler would report a failed test
        ::dup2(::fileno(err), 2);
        try {
            throw_detached(RuntimeConfig{.workers = 1, .unhandled_exception = UnhandledExceptionPolicy::terminate});
        } catch (...) {
            ::_exit(3);
        }
        ::_exit(0);  // not terminated: the test fails
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGABRT);
    std::string out;
    std::rewind(err);
    char buf[256];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, err)) > 0) out.append(buf, n);
    std::fclose(err);
    CHECK(out.find("boom-detached") != std::string::npos);
    CHECK(out.find("terminating") != std::string::npos);
}

} // TEST_SUITE
