// runtime/poll_site.hpp: what a worker's current poll resumed, for the slow-poll report
// (RuntimeConfig::on_slow_poll_detail, runtime/watchdog.hpp). Task-dump builds only
// (EDDY_TASK_DUMP): the site comes from the frame's await record (await_trace.hpp).
//
// # Why a copy under the poll counter, and not a pointer or a call from the worker
// The watchdog reports while the poll still runs, on the reactor thread. The await site is
// a file name and a function name (static storage: a pointer is enough) and a line. The task's name is
// not: it lives in the root's FrameExtra, freed with its header, which may happen during
// the very poll that is reported (the task finishes). So the worker copies the name, at
// most kNameBytes of it, into words of its own at poll start, before it makes poll_seq odd;
// the watchdog reads them and checks poll_seq again, seqlock-style. A report from the worker
// at the end of the poll would need no copy, but it would come only when the poll ends,
// never for a task stuck for good, which is when the report matters most.
//
// # Ordering (no fences)
// Worker: stores file, function, line and the name words with release, then poll_seq odd with
// release (Worker::run). Watchdog (read()): loads poll_seq with acquire, the fields with
// acquire, poll_seq again. A field value from the poll whose odd number it saw is visible
// (release/acquire on poll_seq); a value from a later poll was stored, with release, after
// that poll's earlier even store, so the second load of poll_seq sees that store and the
// copy is thrown away. Each field's store pairs with its load in read().
//
// # Which task
// The resumed frame is often not the task's own: an I/O completion resumes the helper
// coroutine that awaited the read, several `co_await`s below the spawned task. publish()
// follows the chain upwards (task_name()): an awaited eddy task's continuation, a
// combinator child's awaiter (FinishHook::parent), up to the spawned task or group member,
// whose header holds the name. A chain through another kind of coroutine ends unnamed.
//
// Cost: a worker with slow_poll_threshold set, in task-dump builds only, copies the resumed
// frame's site, walks up to its task (one load per level) and copies up to 64 bytes of the
// name per poll. Other builds have none of it.
#pragma once

#include "private.hpp"

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <cstring>
#include <string_view>

#include <eddy/runtime/detail/scheduler_api.hpp>
#include <eddy/tasks/detail/await_trace.hpp>
#include <eddy/tasks/detail/frame_header.hpp>
#include <eddy/tasks/detail/promise.hpp>

namespace eddy::detail {

class PollSite {
public:
    static constexpr std::size_t kNameBytes = 64;

    /// What read() copies out.
    struct Copy {
        const char* file = nullptr;      // static storage (the compiler's, AwaitSite)
        const char* function = nullptr;  // the same
        std::uint32_t line = 0;
        char name[kNameBytes + 1] = {};
    };

    /// Owner worker, before it makes poll_seq odd: records the queue item `task` it resumes.
    void publish(void* task) noexcept {
        const char* file = nullptr;
        const char* function = nullptr;
        std::uint32_t line = 0;
        std::string_view name;
        if (!is_runnable_item(task)) {
            // A frame that nobody runs: its record and header are stable until we resume it.
#if EDDY_TASK_DUMP
            PromiseBase& p = std::coroutine_handle<PromiseBase>::from_address(task).promise();
            const AwaitTrace& t = p.trace_record();
            if (t.vt->state == nullptr) {  // suspended in an awaiter: the site it resumes at
                file = t.site.file();
                function = t.site.function();
                line = t.site.line();
            }
#endif
            name = task_name(task);
        }
        std::uint64_t words[kWords] = {};
        if (!name.empty()) std::memcpy(words, name.data(), name.size() < kNameBytes ? name.size() : kNameBytes);
        // Release, each: pairs with read()'s acquire load of the same field (see above).
        file_.store(file, std::memory_order_release);
        function_.store(function, std::memory_order_release);
        line_.store(line, std::memory_order_release);
        for (std::size_t i = 0; i < kWords; ++i) name_[i].store(words[i], std::memory_order_release);
    }

    /// Any thread: the fields of poll `seq` (odd), read as `poll_seq` says; false when that
    /// poll ended meanwhile (`out` is then not to be used).
    bool read(const std::atomic<std::uint64_t>& poll_seq, std::uint64_t seq, Copy& out) const noexcept {
        // Acquire: pairs with Worker::run's release store of the odd number.
        if (poll_seq.load(std::memory_order_acquire) != seq) return false;
        // Acquire, each: pairs with publish()'s release store of the same field.
        out.file = file_.load(std::memory_order_acquire);
        out.function = function_.load(std::memory_order_acquire);
        out.line = line_.load(std::memory_order_acquire);
        std::uint64_t words[kWords];
        for (std::size_t i = 0; i < kWords; ++i) words[i] = name_[i].load(std::memory_order_acquire);
        // Relaxed: after the acquire loads above, which it cannot pass; see "Ordering".
        if (poll_seq.load(std::memory_order_relaxed) != seq) return false;
        std::memcpy(out.name, words, kNameBytes);
        out.name[kNameBytes] = '\0';
        return true;
    }

private:
    static constexpr std::size_t kWords = kNameBytes / 8;
    static constexpr int kMaxHops = 64;  // awaits and combinators followed up from the resumed frame

    /// The name of the task `frame` runs for: the first frame finished by a hook with no
    /// parent (a spawned task or a group member, which has a header and maybe a name),
    /// found by following `co_await` continuations and combinators' parents up from the
    /// resumed frame. Every frame on the way is suspended, awaiting the one below it, so it
    /// and its link stay as they are until the resumed frame finishes.
    static std::string_view task_name(void* frame) noexcept {
        for (int hop = 0; frame != nullptr && hop < kMaxHops; ++hop) {
            const PromiseBase& p = std::coroutine_handle<PromiseBase>::from_address(frame).promise();
            const FinishHook* hook = p.finish_hook();
            if (hook == nullptr) {
                frame = p.awaiting_frame();
            } else if (hook->parent != nullptr) {
                frame = hook->parent;
            } else {
                const FrameHeader* h = header_of(frame);
                return h->extra != nullptr ? std::string_view(h->extra->name) : std::string_view();
            }
        }
        return {};
    }
    std::atomic<const char*> file_{nullptr};
    std::atomic<const char*> function_{nullptr};
    std::atomic<std::uint32_t> line_{0};
    std::atomic<std::uint64_t> name_[kWords] = {};
};

}  // namespace eddy::detail
