//! eddy/process/command.hpp: process::Command, a builder that starts child processes (like
//! tokio::process::Command), with process::Stdio and process::Output.
//!
//!     eddy::process::Command cmd("sh");
//!     cmd.args({"-c", "echo $GREETING; exit 3"}).env("GREETING", "hi");
//!     eddy::process::Output out = co_await cmd.output();   // out.status.code() == 3
//!
//!     eddy::process::Child child = eddy::process::Command("cat")
//!         .stdin(eddy::process::Stdio::piped()).stdout(eddy::process::Stdio::piped()).spawn();
//!
//! A program without a slash is looked up in the PATH of the calling process (as execvp
//! does; an env("PATH", ...) given to the command changes the child's PATH, not the lookup).
//! spawn() is synchronous: posix_spawn, which glibc implements with a vfork-style clone (the
//! child shares the parent's memory until it execs, so a big parent costs nothing to copy)
//! and which reports a failed exec's errno back to the parent. In the child: the signal mask
//! is emptied, SIGPIPE is set back to its default action, standard input, output and error
//! are set up as asked, and every other descriptor is closed, close-on-exec or not.
//!
//! Errors: spawn() throws std::system_error with the errno, its message naming what failed:
//! ENOENT for a program that is not found and EACCES for one that is not executable (naming
//! the program), ENOENT or ENOTDIR for a bad current_dir (naming the directory), EMFILE when
//! the descriptors for the pipes or the pidfd run out. output() and status() throw what
//! spawn() and Child::wait() throw, and std::system_error for a failed read of a pipe.
//!
//! Cancellation: cancelling output() or status() drops the Child (see eddy/process/child.hpp:
//! it keeps running unless kill_on_drop(true), and is reaped in the background).
//! @file
#pragma once

#include <cstddef>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <eddy/process/child.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::process {

/// What a child's standard input, output or error is connected to.
class Stdio {
public:
    /// How the stream is set up.
    enum class Kind {
        kInherit,  ///< the parent's own descriptor
        kPiped,    ///< a new pipe, whose other end is in the Child
        kNull,     ///< /dev/null
    };
    /// A new pipe to the parent (Child::stdin, stdout or stderr).
    static Stdio piped() noexcept { return Stdio(Kind::kPiped); }
    /// The parent's own standard stream.
    static Stdio inherit() noexcept { return Stdio(Kind::kInherit); }
    /// /dev/null: reads give end of file, writes are discarded.
    static Stdio null() noexcept { return Stdio(Kind::kNull); }
    /// Which one this is.
    Kind kind() const noexcept { return kind_; }

private:
    explicit Stdio(Kind k) noexcept : kind_(k) {}
    Kind kind_;
};

/// What Command::output() collects: the status and everything the child wrote.
struct Output {
    ExitStatus status;              ///< how the child ended
    std::vector<std::byte> stdout;  ///< its standard output (empty if not piped)
    std::vector<std::byte> stderr;  ///< its standard error (empty if not piped)
};

/// A builder for child processes (see the file comment). Every setter returns *this.
class Command {
public:
    /// A command running `program` (looked up in PATH when it has no slash), with argv[0] =
    /// `program` and no other argument.
    explicit Command(std::string_view program);

    /// Appends one argument.
    Command& arg(std::string_view a);
    /// Appends several arguments.
    Command& args(std::initializer_list<std::string_view> list);
    /// Appends several arguments.
    Command& args(const std::vector<std::string>& list);
    /// Sets `key`=`value` in the child's environment.
    Command& env(std::string_view key, std::string_view value);
    /// Removes `key` from the child's environment.
    Command& env_remove(std::string_view key);
    /// Starts the child's environment empty (then only env() settings apply).
    Command& env_clear();
    /// The child's working directory (the parent's by default).
    Command& current_dir(std::string_view dir);
    /// The child's standard input (spawn and status: inherit; output: null).
    Command& stdin(Stdio s) noexcept { return set(&Command::stdin_, s); }
    /// The child's standard output (spawn and status: inherit; output: piped).
    Command& stdout(Stdio s) noexcept { return set(&Command::stdout_, s); }
    /// The child's standard error (spawn and status: inherit; output: piped).
    Command& stderr(Stdio s) noexcept { return set(&Command::stderr_, s); }
    /// Whether a Child dropped before it was reaped gets SIGKILL (default false).
    Command& kill_on_drop(bool yes) noexcept {
        kill_on_drop_ = yes;
        return *this;
    }

    /// Starts the child. Throws std::system_error (see the file comment).
    Child spawn();
    /// `co_await cmd.output()`: runs the child to its end, collecting its standard output
    /// and error concurrently (neither full pipe blocks the other). The Command must outlive
    /// the await (the child is spawned when it starts).
    [[nodiscard]] Task<Output> output();
    /// `co_await cmd.status()`: runs the child to its end; gives how it ended. The Command
    /// must outlive the await.
    [[nodiscard]] Task<ExitStatus> status();

    /// The program, as given.
    const std::string& program() const noexcept { return argv_.front(); }

private:
    Command& set(std::optional<Stdio> Command::*slot, Stdio s) noexcept {
        this->*slot = s;
        return *this;
    }
    Child spawn_with(Stdio in, Stdio out, Stdio err);
    std::vector<std::string> argv_;
    std::map<std::string, std::optional<std::string>> env_;
    bool env_clear_ = false;
    std::optional<std::string> dir_;
    std::optional<Stdio> stdin_;
    std::optional<Stdio> stdout_;
    std::optional<Stdio> stderr_;
    bool kill_on_drop_ = false;
};

}  // namespace eddy::process
