// tests/runtime/config_workers_test.cpp: what RuntimeConfig (eddy/runtime/config.hpp) does to
// the runtime's threads: thread names, CPU pinning, stack size (and a worker that cannot
// start), the start/stop hooks, and the global queue interval.
//
// The environment is changed only through CleanEnv/ScopedEnv (tests/support/runtime_config.hpp).
#include <doctest/doctest.h>

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
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
#include "support/runtime_config.hpp"
#include "support/sanitized.hpp"

using namespace eddy::test::runtime_config;

namespace {

/// The calling thread's name.
std::string this_thread_name() {
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof name);
    return name;
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

}  // namespace

TEST_SUITE("runtime/config") {

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
        CHECK(
            rt.block_on([]() -> eddy::Task<std::string> { co_return this_thread_name(); }()).rfind("cfgt-worker-", 0) ==
            0);
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
            Runtime rt(RuntimeConfig{
                .workers = 2, .thread_name_prefix = "stk", .stack_size = requested, .on_thread_start = [&] {
                    std::lock_guard lock(mutex);
                    sizes[this_thread_name()] = this_thread_stack_size();
                }});
            const std::size_t in_task =
                rt.block_on([]() -> eddy::Task<std::size_t> { co_return this_thread_stack_size(); }());
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

TEST_CASE("on the epoll driver, the file pool's threads run the hooks too, named and on that thread") {
    CleanEnv clean;
    char dir[] = "/tmp/eddy-hooks-XXXXXX";
    REQUIRE(::mkdtemp(dir) != nullptr);
    const std::string sub = std::string(dir) + "/made";
    std::mutex mutex;
    std::multiset<std::string> started, stopped;
    std::multiset<pid_t> start_tids, stop_tids;
    struct stat st {};
    {
        Runtime rt(RuntimeConfig{.workers = 1,
                                 .driver = eddy::IoDriver::epoll,
                                 .thread_name_prefix = "hook",
                                 .on_thread_start =
                                     [&] {
                                         std::lock_guard lock(mutex);
                                         started.insert(this_thread_name());
                                         start_tids.insert(static_cast<pid_t>(::syscall(SYS_gettid)));
                                     },
                                 .on_thread_stop =
                                     [&] {
                                         std::lock_guard lock(mutex);
                                         stopped.insert(this_thread_name());
                                         stop_tids.insert(static_cast<pid_t>(::syscall(SYS_gettid)));
                                     }});
        // A path operation (mkdirat) always goes to the pool: a "hook-io" thread starts.
        rt.block_on([](std::string p) -> eddy::Task<void> { co_await eddy::fs::create_dir(std::move(p)); }(sub));
        CHECK(::stat(sub.c_str(), &st) == 0);
    }
    ::rmdir(sub.c_str());
    ::rmdir(dir);
    CHECK(S_ISDIR(st.st_mode));
    const std::multiset<std::string> expected{"hook-io", "hook-reactor", "hook-worker-0"};
    CHECK(started == expected);
    CHECK(stopped == started);
    CHECK(start_tids == stop_tids);
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
}  // namespace

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

}  // TEST_SUITE("runtime/config")
