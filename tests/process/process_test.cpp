// tests/process/process_test.cpp: process::Command and process::Child with real programs:
// exit codes and signals, stdin/stdout/stderr pipes (1 MiB through cat, both directions at
// once; output() with both pipes full), /dev/null, environment and working directory,
// try_wait, kill and signal, a cancelled wait, dropped children reaped in the background,
// 50 children at once all reaped, and the errors of spawn (ENOENT, EACCES, a bad
// current_dir, EMFILE). Nothing waits for "long enough": each case waits for the child.
// wait() has two ways (IORING_OP_WAITID where the ring has it, the pidfd poll otherwise):
// the exit, signal, kill, cancel and ECHILD cases run each way (for_each_wait_path).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <system_error>
#include <vector>

#include <eddy/io/stream_ops.hpp>
#include <eddy/process/command.hpp>
#include <eddy/runtime/join_handle.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/spawn.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/sync/event.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/time/sleep.hpp>

#include "process/orphans.hpp"
#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::process::Child;
using eddy::process::Command;
using eddy::process::ExitStatus;
using eddy::process::Output;
using eddy::process::Stdio;
using eddy::test::read_to_end;
using eddy::test::run;
using eddy::test::text;

namespace {

std::string str(const std::vector<std::byte>& b) { return text(b); }

/// Whether `pid` is gone for good (reaped: waitid finds no such child).
bool reaped(pid_t pid) {
    siginfo_t info{};
    return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 && errno == ECHILD;
}

/// Waits (polling, with a 10 s bound that only a hang reaches) until `pid` is reaped.
Task<bool> eventually_reaped(pid_t pid) {
    for (int i = 0; i < 10000; ++i) {
        if (reaped(pid)) co_return true;
        co_await eddy::sleep(std::chrono::milliseconds(1));
    }
    co_return false;
}

/// Runs `body(rt)` once with Child::wait() on IORING_OP_WAITID (skipped, with a MESSAGE,
/// where the kernel lacks it) and once forced onto the pidfd poll.
template <class F>
void for_each_wait_path(Runtime& rt, F body) {
    auto probe = []() -> Task<bool> { co_return eddy::process::detail::waits_with_waitid(); };
    if (run(rt, probe())) {
        CAPTURE("IORING_OP_WAITID");
        body(rt);
    } else {
        MESSAGE("this kernel has no IORING_OP_WAITID (Linux 6.7+): only the pidfd poll runs");
    }
    struct Forced {
        Forced() { eddy::process::detail::force_pidfd_poll(true); }
        ~Forced() { eddy::process::detail::force_pidfd_poll(false); }
    } forced;
    CHECK_FALSE(run(rt, probe()));
    CAPTURE("pidfd poll");
    body(rt);
}

std::error_code spawn_error(Command& cmd, std::string& message) {
    try {
        (void)cmd.spawn();
    } catch (const std::system_error& e) {
        message = e.what();
        return e.code();
    }
    return {};
}

}  // namespace

TEST_CASE("exit codes and signals: sh -c 'exit 3', false, kill -TERM $$") {
    for (std::size_t workers : {1, 2}) {
        Runtime runtime(RuntimeConfig{.workers = workers});
        for_each_wait_path(runtime, [](Runtime& rt) {
            ExitStatus three = run(rt, Command("/bin/sh").args({"-c", "exit 3"}).status());
            CHECK(three.code() == 3);
            CHECK_FALSE(three.signal());
            CHECK_FALSE(three.success());
            ExitStatus f = run(rt, Command("false").status());
            CHECK(f.code() == 1);
            ExitStatus term = run(rt, Command("sh").args({"-c", "kill -TERM $$"}).status());
            CHECK(term.signal() == SIGTERM);
            CHECK_FALSE(term.code());
            CHECK(run(rt, Command("true").status()).success());
        });
    }
}

TEST_CASE("cat: 1 MiB written to stdin and read back from stdout at once, byte for byte") {
    for (std::size_t workers : {1, 2}) {
        Runtime rt(RuntimeConfig{.workers = workers});
        const std::vector<std::byte> payload = eddy::test::pattern(1 << 20, static_cast<std::uint32_t>(workers));
        auto body = [&]() -> Task<void> {
            Child child = Command("cat").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn();
            CHECK(child.id() > 0);
            REQUIRE(child.stdin);
            REQUIRE(child.stdout);
            CHECK_FALSE(child.stderr);
            auto feed = [](Child& c, const std::vector<std::byte>& data) -> Task<void> {
                co_await eddy::io::write_all(*c.stdin, data);
                c.stdin.reset();  // cat sees end of file
            };
            auto [fed, back] = co_await eddy::when_all(feed(child, payload), read_to_end(*child.stdout));
            (void)fed;
            CHECK(back.size() == payload.size());
            CHECK(back == text(payload));
            CHECK((co_await child.wait()).success());
        };
        run(rt, body());
    }
}

TEST_CASE("output(): stdout and stderr collected concurrently, 1 MiB each, stderr first") {
    for (std::size_t workers : {1, 2}) {
        Runtime rt(RuntimeConfig{.workers = workers});
        Command cmd("sh");
        cmd.args({"-c", "head -c 1048576 /dev/zero >&2; head -c 1048576 /dev/zero | tr '\\0' x; echo err-end >&2"});
        Output out = run(rt, cmd.output());
        CHECK(out.status.success());
        CHECK(out.stdout.size() == std::size_t{1} << 20);
        CHECK(out.stderr.size() == (std::size_t{1} << 20) + 8);
        CHECK(std::string(str(out.stdout), 0, 3) == "xxx");
        CHECK(str(out.stderr).ends_with("err-end\n"));
    }
}

TEST_CASE("output(): stdin is /dev/null unless set; stderr piped separately; Stdio::null") {
    Runtime rt(RuntimeConfig{.workers = 1});
    Output cat = run(rt, Command("cat").output());  // stdin defaults to /dev/null: EOF at once
    CHECK(cat.status.success());
    CHECK(cat.stdout.empty());
    Output split = run(rt, Command("sh").args({"-c", "echo out; echo err >&2; exit 4"}).output());
    CHECK(split.status.code() == 4);
    CHECK(str(split.stdout) == "out\n");
    CHECK(str(split.stderr) == "err\n");
    Output nulled = run(rt, Command("sh").args({"-c", "echo out; echo err >&2"}).stderr(Stdio::null()).output());
    CHECK(str(nulled.stdout) == "out\n");
    CHECK(nulled.stderr.empty());
    auto spawned = [&]() -> Task<std::string> {
        Child c = Command("cat").stdin(Stdio::null()).stdout(Stdio::piped()).spawn();
        std::string got = co_await read_to_end(*c.stdout);
        CHECK((co_await c.wait()).success());
        co_return got;
    };
    CHECK(run(rt, spawned()).empty());
}

TEST_CASE("env, env_remove, env_clear and current_dir, seen by sh -c 'echo $K; pwd'") {
    Runtime rt(RuntimeConfig{.workers = 1});
    REQUIRE(::setenv("EDDY_PROCESS_TEST_GONE", "still here", 1) == 0);
    Command cmd("sh");
    cmd.args({"-c", "echo $K; echo ${EDDY_PROCESS_TEST_GONE:-unset}; pwd"})
        .env("K", "V=1")
        .env_remove("EDDY_PROCESS_TEST_GONE")
        .current_dir("/tmp");
    Output out = run(rt, cmd.output());
    CHECK(str(out.stdout) == "V=1\nunset\n/tmp\n");
    Command bare("/bin/sh");
    bare.args({"-c", "env"}).env_clear().env("ONLY", "this");
    Output env = run(rt, bare.output());
    // sh may add PWD, SHLVL and _ of its own; nothing of ours but ONLY.
    CHECK(str(env.stdout).find("ONLY=this\n") != std::string::npos);
    CHECK(str(env.stdout).find("EDDY_PROCESS_TEST_GONE") == std::string::npos);
    ::unsetenv("EDDY_PROCESS_TEST_GONE");
}

TEST_CASE("try_wait before and after the exit; kill gives signal 9; signal(SIGTERM)") {
    for (std::size_t workers : {1, 2}) {
        Runtime runtime(RuntimeConfig{.workers = workers});
        for_each_wait_path(runtime, [](Runtime& rt) {
            auto body = [&]() -> Task<void> {
                Child sleeper = Command("sleep").arg("30").spawn();
                CHECK_FALSE(sleeper.try_wait());
                sleeper.kill();
                ExitStatus st = co_await sleeper.wait();
                CHECK(st.signal() == SIGKILL);
                CHECK(sleeper.try_wait() == st);  // again: the same status
                sleeper.kill();                   // after reaping: a no-op
                CHECK((co_await sleeper.wait()) == st);

                Child other = Command("sleep").arg("30").spawn();
                other.signal(SIGTERM);
                CHECK((co_await other.wait()).signal() == SIGTERM);

                // try_wait once the child has exited: poll until it reports (never blocks).
                Child quick = Command("true").spawn();
                std::optional<ExitStatus> got;
                for (int i = 0; i < 10000 && !got; ++i) {
                    got = quick.try_wait();
                    if (!got) co_await eddy::sleep(std::chrono::milliseconds(1));
                }
                REQUIRE(got);
                CHECK(got->success());
                CHECK(reaped(quick.id()));
            };
            run(rt, body());
        });
    }
}

TEST_CASE("a cancelled wait leaves the child waitable") {
    Runtime runtime(RuntimeConfig{.workers = 2});
    for_each_wait_path(runtime, [](Runtime& rt) {
        auto body = [&]() -> Task<void> {
            Child child = Command("sleep").arg("30").spawn();
            std::stop_source stop;
            auto cancel_soon = [](std::stop_source& s) -> Task<void> {
                for (int i = 0; i < 20; ++i) co_await eddy::yield_now();
                s.request_stop();
            };
            auto waited = [](Child& c, std::stop_token t) -> Task<bool> {
                try {
                    (void)co_await c.wait(std::move(t));
                } catch (const eddy::OperationCancelled&) {
                    co_return true;
                }
                co_return false;
            };
            auto [cancelled, done] = co_await eddy::when_all(waited(child, stop.get_token()), cancel_soon(stop));
            (void)done;
            CHECK(cancelled);
            CHECK_FALSE(child.try_wait());
            child.kill();
            CHECK((co_await child.wait()).signal() == SIGKILL);
        };
        run(rt, body());
    });
}

TEST_CASE("a wait under the task's cancellation; a child reaped elsewhere gives ECHILD") {
    Runtime runtime(RuntimeConfig{.workers = 2});
    for_each_wait_path(runtime, [](Runtime& rt) {
        auto body = [&]() -> Task<void> {
            // The task's own cancellation (an abort, not a token) cancels the wait; the child stays
            // waitable, and a second wait, after the kill, reaps it.
            Child child = Command("sleep").arg("30").spawn();
            auto waited = [](Child& c) -> Task<int> { co_return (co_await c.wait()).code().value_or(-1); };
            eddy::JoinHandle<int> handle = eddy::spawn_abortable(waited(child));
            for (int i = 0; i < 20; ++i) co_await eddy::yield_now();
            handle.abort();
            bool aborted = false;
            try {
                (void)co_await std::move(handle);
            } catch (const eddy::TaskAborted&) {
                aborted = true;
            }
            CHECK(aborted);
            CHECK_FALSE(child.try_wait());
            child.kill();
            CHECK((co_await child.wait()).signal() == SIGKILL);
            CHECK(reaped(child.id()));

            // Reaped behind the Child's back: wait() throws std::system_error(ECHILD).
            Child stolen = Command("true").spawn();
            siginfo_t info{};
            REQUIRE(::waitid(P_PID, static_cast<id_t>(stolen.id()), &info, WEXITED) == 0);
            std::error_code code;
            try {
                (void)co_await stolen.wait();
            } catch (const std::system_error& e) {
                code = e.code();
            }
            CHECK(code == std::errc::no_child_process);
        };
        run(rt, body());
    });
}

TEST_CASE("dropped children: kept running, or killed with kill_on_drop, and reaped either way") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto body = [&]() -> Task<void> {
        pid_t kept = 0;
        pid_t killed = 0;
        {
            Child a = Command("sh").args({"-c", "read x"}).stdin(Stdio::piped()).spawn();
            kept = a.id();
            Child b = Command("sleep").arg("30").kill_on_drop(true).spawn();
            killed = b.id();
            // a's stdin closes with it: `read` gets end of file and sh exits by itself.
        }
        CHECK(co_await eventually_reaped(killed));
        CHECK(co_await eventually_reaped(kept));
    };
    run(rt, body());
    // Dropped off the runtime: the orphan list keeps it. ~Child looks before its stdin
    // closes, so sh is still waiting in `read` then; the next spawn reaps it once it ended.
    pid_t orphan = 0;
    {
        Child c = Command("sh").args({"-c", "read x"}).stdin(Stdio::piped()).spawn();
        orphan = c.id();
    }
    siginfo_t info{};  // wait (not reap) until it has exited
    REQUIRE(::waitid(P_PID, static_cast<id_t>(orphan), &info, WEXITED | WNOWAIT) == 0);
    CHECK_FALSE(reaped(orphan));
    Child next = Command("true").spawn();
    CHECK(reaped(orphan));
    CHECK(run(rt, next.wait()).success());
}

TEST_CASE("kill_on_drop children in a task that a runtime's shutdown destroys are reaped with it") {
    // Twenty `sleep 60` with kill_on_drop, held by a task still sleeping when the runtime
    // goes: its frame is destroyed, each ~Child sends SIGKILL, and each child is reaped then,
    // not left a zombie until some later Command::spawn (there is none here).
    std::vector<pid_t> pids;
    {
        Runtime rt(RuntimeConfig{.workers = 2});
        run(rt, [&]() -> Task<void> {
            eddy::Event held;
            (void)eddy::spawn([](std::vector<pid_t>& out, eddy::Event& ready) -> Task<void> {
                std::vector<Child> children;
                for (int i = 0; i < 20; ++i) {
                    children.push_back(Command("sleep").arg("60").kill_on_drop(true).spawn());
                    out.push_back(children.back().id());
                }
                ready.set();
                co_await eddy::sleep(std::chrono::hours(1));  // never ends: the shutdown destroys it
            }(pids, held));
            co_await held;
        }());
    }
    REQUIRE(pids.size() == 20);
    int zombies = 0;
    for (pid_t pid : pids) zombies += reaped(pid) ? 0 : 1;
    CHECK(zombies == 0);
}

TEST_CASE("50 children at once, all reaped: no zombie left") {
    Runtime rt(RuntimeConfig{.workers = 2});
    auto body = [&]() -> Task<std::vector<pid_t>> {
        std::vector<Child> children;
        std::vector<pid_t> pids;
        for (int i = 0; i < 50; ++i) {
            children.push_back(Command("true").spawn());
            pids.push_back(children.back().id());
        }
        std::vector<Task<ExitStatus>> waits;
        for (auto& c : children) waits.push_back(c.wait());
        for (const ExitStatus& st : co_await eddy::when_all(std::move(waits))) CHECK(st.success());
        co_return pids;
    };
    for (pid_t pid : run(rt, body())) CHECK(reaped(pid));
    siginfo_t info{};
    CHECK(::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0);
    CHECK(errno == ECHILD);
}

TEST_CASE("spawn errors: missing program, not executable, bad current_dir, EMFILE") {
    std::string message;
    Command missing("eddy-no-such-program-here");
    CHECK(spawn_error(missing, message) == std::errc::no_such_file_or_directory);
    CHECK(message.find("eddy-no-such-program-here") != std::string::npos);

    char path[] = "/tmp/eddy-process-test-XXXXXX";
    const int fd = ::mkstemp(path);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, "#!/bin/sh\n", 10) == 10);
    ::close(fd);
    REQUIRE(::chmod(path, 0644) == 0);
    Command not_exec(path);
    CHECK(spawn_error(not_exec, message) == std::errc::permission_denied);
    CHECK(message.find(path) != std::string::npos);
    ::unlink(path);

    Command bad_dir("true");
    bad_dir.current_dir("/eddy-no-such-directory");
    CHECK(spawn_error(bad_dir, message) == std::errc::no_such_file_or_directory);
    CHECK(message.find("/eddy-no-such-directory") != std::string::npos);

    // EMFILE: fill this process's descriptor table (under a lowered soft limit) and ask for
    // pipes. No runtime is running, so nothing else needs a descriptor meanwhile.
    rlimit old{};
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
    rlimit low = old;
    low.rlim_cur = 256;
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
    std::vector<int> filler;
    for (int d; (d = ::dup(0)) >= 0;) filler.push_back(d);
    Command piped("true");
    piped.stdout(Stdio::piped());
    const std::error_code emfile = spawn_error(piped, message);
    for (int d : filler) ::close(d);
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &old) == 0);
    CHECK(emfile == std::errc::too_many_files_open);
    CHECK(message.find("true") != std::string::npos);
}
