// io/process/command.cpp: Command's setters, spawn (posix_spawnp, then pidfd_open), output
// and status.
#include <eddy/process/command.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <utility>

#include <eddy/io/pipe.hpp>
#include <eddy/runtime/when_all.hpp>

#include "process/orphans.hpp"

extern char** environ;

namespace eddy::process {

namespace {

constexpr const char* kSpawn = "eddy::process::Command::spawn: ";

[[noreturn]] void fail(int err, const std::string& what) {
    throw std::system_error(err, std::system_category(), kSpawn + what);
}

void check(int err, const char* what) {
    if (err != 0) fail(err, what);
}

/// posix_spawn's attributes and file actions, destroyed at the end of the scope.
struct SpawnSetup {
    posix_spawnattr_t attr;
    posix_spawn_file_actions_t actions;
    SpawnSetup() {
        check(posix_spawnattr_init(&attr), "posix_spawnattr_init");
        if (const int err = posix_spawn_file_actions_init(&actions); err != 0) {
            posix_spawnattr_destroy(&attr);
            fail(err, "posix_spawn_file_actions_init");
        }
    }
    ~SpawnSetup() {
        posix_spawn_file_actions_destroy(&actions);
        posix_spawnattr_destroy(&attr);
    }
    SpawnSetup(const SpawnSetup&) = delete;
    SpawnSetup& operator=(const SpawnSetup&) = delete;
};

/// The environment the child gets: the parent's (unless cleared) with the command's changes.
std::vector<std::string> environment(const std::map<std::string, std::optional<std::string>>& changes, bool clear) {
    std::vector<std::string> out;
    if (!clear) {
        for (char** e = environ; e && *e; ++e) {
            const std::string_view entry(*e);
            const auto eq = entry.find('=');
            if (!changes.contains(std::string(entry.substr(0, eq)))) out.emplace_back(entry);
        }
    }
    for (const auto& [key, value] : changes)
        if (value) out.push_back(key + "=" + *value);
    return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
    std::vector<char*> out;
    out.reserve(strings.size() + 1);
    for (auto& s : strings) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

/// Whether `dir` can be the child's working directory; else the errno that says why not.
int dir_error(const std::string& dir) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) return errno;
    if (!S_ISDIR(st.st_mode)) return ENOTDIR;
    if (::access(dir.c_str(), X_OK) != 0) return errno;
    return 0;
}

/// Reads `stream` to its end.
Task<std::vector<std::byte>> read_all(std::optional<io::DescriptorStream>& stream) {
    std::vector<std::byte> out;
    if (!stream) co_return out;
    std::size_t used = 0;
    for (;;) {
        if (out.size() - used < 16384) out.resize(used + 65536);
        const std::size_t n = co_await stream->read(std::span(out).subspan(used));
        if (n == 0) break;
        used += n;
    }
    out.resize(used);
    co_return out;
}

}  // namespace

Command::Command(std::string_view program) { argv_.emplace_back(program); }

Command& Command::arg(std::string_view a) {
    argv_.emplace_back(a);
    return *this;
}

Command& Command::args(std::initializer_list<std::string_view> list) {
    for (const auto a : list) argv_.emplace_back(a);
    return *this;
}

Command& Command::args(const std::vector<std::string>& list) {
    argv_.insert(argv_.end(), list.begin(), list.end());
    return *this;
}

Command& Command::env(std::string_view key, std::string_view value) {
    env_[std::string(key)] = std::string(value);
    return *this;
}

Command& Command::env_remove(std::string_view key) {
    env_[std::string(key)] = std::nullopt;
    return *this;
}

Command& Command::env_clear() {
    env_clear_ = true;
    env_.clear();
    return *this;
}

Command& Command::current_dir(std::string_view dir) {
    dir_ = std::string(dir);
    return *this;
}

Child Command::spawn() {
    return spawn_with(stdin_.value_or(Stdio::inherit()), stdout_.value_or(Stdio::inherit()),
                      stderr_.value_or(Stdio::inherit()));
}

Child Command::spawn_with(Stdio in, Stdio out, Stdio err) {
    detail::reap_orphans();
    SpawnSetup setup;
    // The parent's ends of the pipes, and the child's ends (closed here once it has them).
    const std::array<Stdio, 3> kinds{in, out, err};
    constexpr std::array<const char*, 3> kNames{"stdin", "stdout", "stderr"};
    std::array<io::FileDescriptor, 3> ours;
    std::array<io::FileDescriptor, 3> theirs;
    for (int i = 0; i < 3; ++i) {
        if (kinds[i].kind() == Stdio::Kind::kPiped) {
            int fds[2];
            if (::pipe2(fds, O_CLOEXEC) != 0)
                fail(errno, std::string("a pipe for the ") + kNames[i] + " of " + program());
            // The child reads its stdin from the read end and writes to the write ends.
            ours[i] = io::FileDescriptor(i == 0 ? fds[1] : fds[0]);
            theirs[i] = io::FileDescriptor(i == 0 ? fds[0] : fds[1]);
            check(posix_spawn_file_actions_adddup2(&setup.actions, theirs[i].get(), i), "adddup2");
        } else if (kinds[i].kind() == Stdio::Kind::kNull) {
            check(posix_spawn_file_actions_addopen(&setup.actions, i, "/dev/null", i == 0 ? O_RDONLY : O_WRONLY, 0),
                  "addopen /dev/null");
        }
    }
    // Every other descriptor closes in the child, close-on-exec or not.
    check(posix_spawn_file_actions_addclosefrom_np(&setup.actions, 3), "addclosefrom_np");
    if (dir_) check(posix_spawn_file_actions_addchdir_np(&setup.actions, dir_->c_str()), "addchdir_np");
    sigset_t mask;
    sigemptyset(&mask);
    check(posix_spawnattr_setsigmask(&setup.attr, &mask), "setsigmask");
    sigaddset(&mask, SIGPIPE);
    check(posix_spawnattr_setsigdefault(&setup.attr, &mask), "setsigdefault");
    check(posix_spawnattr_setflags(&setup.attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF), "setflags");

    std::vector<std::string> argv_copy = argv_;
    std::vector<std::string> envs = environment(env_, env_clear_);
    std::vector<char*> argv = pointers(argv_copy);
    std::vector<char*> envp = pointers(envs);
    pid_t pid = -1;
    if (const int e = posix_spawnp(&pid, argv[0], &setup.actions, &setup.attr, argv.data(), envp.data()); e != 0) {
        // One errno for the chdir and the exec: the directory is to blame if it is unusable.
        if (dir_) {
            if (const int d = dir_error(*dir_); d != 0) fail(d, "current_dir " + *dir_ + " (for " + program() + ")");
        }
        fail(e, program());
    }
    // No pid reuse race: only this process can reap the child, and it has not yet.
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0U));
    if (pidfd < 0) {
        const int e = errno;
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        fail(e, "pidfd_open for " + program());
    }
    Child child(pid, io::FileDescriptor(pidfd), kill_on_drop_);
    if (ours[0]) child.stdin.emplace(std::move(ours[0]));
    if (ours[1]) child.stdout.emplace(std::move(ours[1]));
    if (ours[2]) child.stderr.emplace(std::move(ours[2]));
    return child;
}

Task<Output> Command::output() {
    Child child =
        spawn_with(stdin_.value_or(Stdio::null()), stdout_.value_or(Stdio::piped()), stderr_.value_or(Stdio::piped()));
    auto [out, err] = co_await when_all(read_all(child.stdout), read_all(child.stderr));
    ExitStatus st = co_await child.wait();
    co_return Output{st, std::move(out), std::move(err)};
}

Task<ExitStatus> Command::status() {
    Child child = spawn();
    co_return co_await child.wait();
}

}  // namespace eddy::process
