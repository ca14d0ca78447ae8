// runtime/task_dump.cpp: walking a paused runtime's tasks into a TaskDump
// (eddy/runtime/task_dump.hpp; the text and JSON forms are in task_dump_format.cpp).
//
// With every worker paused (worker_pause.hpp), each frame is suspended in the awaiter its
// record names, not started, or finished (await_trace.hpp), and nothing but the reactor and
// the blocking threads runs: they may wake a task (queue it) but never resume or destroy one.
// The dump works in two steps, to keep the pause short (benchmarks/dump_pause):
//   1. Capture, while the workers are paused (Capture): what the workers' queues hold (LIFO
//      slots, deques, yielded tasks) and the global queue's items (taken out and pushed
//      back), to tell runnable tasks; then each root depth first: one flat Record per frame
//      (state, site, since when, name and cancellation) and the pieces of its awaiter's
//      description (dump_wait), raw: text copied into one arena, numbers, addresses, joined
//      headers, deadlines as milliseconds left; then the children that description lists.
//   2. Build, after the workers went on (build): the TaskDump tree and its strings out of the
//      records alone (numbers to text, type names demangled, paths trimmed, "join task #n").
//      Nothing of a frame, an awaiter or a header is read then: a resumed task may have
//      destroyed them. A joined header is only compared, as a number, with the roots' own.
// Most of a dump's time is the tree's strings and their allocations (and the page faults of
// fresh memory): step 2 does it while tasks run.
// Only roots and group members are read through their FrameHeader (their name): a nested
// frame may have been allocated inside its parent (HALO) and have none.
#include "clock.hpp"
#include "scheduler.hpp"
#include "worker.hpp"

#include <cxxabi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/task_dump.hpp>
#include <eddy/tasks/errors.hpp>

namespace eddy::detail {
namespace {

#if EDDY_TASK_DUMP
/// A readable type name for an awaiter without dump_wait.
std::string type_name([[maybe_unused]] const AwaitVT& vt) {
#if defined(__cpp_rtti) || defined(__GXX_RTTI)
    if (vt.type != nullptr) {
        int status = 0;
        std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(vt.type->name(), nullptr, nullptr, &status),
                                                 &std::free);
        return "awaiting " + std::string(status == 0 && d ? d.get() : vt.type->name());
    }
#endif
    return "awaiting an awaitable";
}

/// "examples/service/main.cpp" out of "../examples/service/main.cpp".
std::string_view trim_path(std::string_view f) {
    while (f.starts_with("../") || f.starts_with("./")) f.remove_prefix(f.starts_with("./") ? 2 : 3);
    return f;
}
#endif

PromiseBase& promise_at(void* frame) noexcept {
    // Every Task promise starts with PromiseBase, at the offset a PromiseBase-aligned promise
    // has (Task<T> does not support over-aligned T: its frame follows a 48-byte header).
    return std::coroutine_handle<PromiseBase>::from_address(frame).promise();
}

constexpr std::size_t kMaxDepth = 256;  // the build, the formats and the tree's destructor recurse

/// One piece of a wait's description, as dump_wait gave it.
struct Piece {
    enum Kind : std::uint8_t { kText, kNumber, kAddress, kJoin, kDeadline };
    Kind kind;
    bool finished = false;       // kJoin: the joined task had finished
    std::uint32_t at = 0;        // kText: in the arena
    std::uint32_t len = 0;       // kText
    std::int64_t n = 0;          // kNumber; kDeadline: milliseconds left
    std::uintptr_t address = 0;  // kAddress; kJoin: the joined header (compared only)
};

/// One frame, as the capture saw it; in the walk's order (depth first, a task before its
/// children), so that `children` says which records follow as its children.
struct Record {
    std::uint64_t id = 0;
    const char* kind = "child";  // static strings, as are `state` and `file`
    const char* state = "suspended";
    const char* file = nullptr;       // the site's, as the compiler gave it
    const AwaitVT* untold = nullptr;  // an awaiter without dump_wait: its type is named
    std::uint32_t line = 0;
    std::uint32_t waited_ms = 0;
    std::uint32_t name_at = 0, name_len = 0;      // in the arena
    std::uint32_t pieces_at = 0, pieces_end = 0;  // in Capture::pieces
    std::uint32_t children = 0;
    std::int32_t worker = -1;  // runnable in that worker's queue
    bool waited = false;
    bool cancelled = false;
    bool too_deep = false;
};

/// What step 1 copies out (see the top); plain data, read by step 2 only.
struct Captured {
    std::vector<Record> records;
    std::vector<Piece> pieces;
    std::string arena;                  // texts and names
    std::vector<std::uintptr_t> roots;  // the roots' headers, in id order (compared only)
    std::size_t root_count = 0;
};

class Capture final : public DumpWait {
public:
    Capture(Scheduler& sched, std::chrono::steady_clock::time_point now, std::uint32_t now_ms, Captured& out)
        : sched_(sched), now_(now), now_ms_(now_ms), out_(out) {}

    void run(const std::vector<FrameHeader*>& roots) {
        out_.root_count = roots.size();
        out_.records.reserve(roots.size() + roots.size() / 4);
        out_.pieces.reserve(roots.size() * 2);
        out_.arena.reserve(roots.size() * 16);
        out_.roots.reserve(roots.size());
        collect_queued();
        for (FrameHeader* h : roots) out_.roots.push_back(reinterpret_cast<std::uintptr_t>(h));
        next_id_ = roots.size();
        std::uint64_t id = 0;
        for (FrameHeader* h : roots) {
            const std::uint32_t s = h->state.load(std::memory_order_acquire);
            visit(h->frame(), (s & FrameHeader::kThreadWaiting) != 0 ? "block_on" : "spawned", h, ++id, 0);
        }
    }

    // DumpWait: the awaiter of the task being visited describes its wait.
    void text(std::string_view s) override {
        piece(Piece{.kind = Piece::kText,
                    .at = static_cast<std::uint32_t>(out_.arena.size()),
                    .len = static_cast<std::uint32_t>(s.size())});
        out_.arena += s;
    }
    void number(std::int64_t n) override { piece(Piece{.kind = Piece::kNumber, .n = n}); }
    void address(const void* p) override {
        piece(Piece{.kind = Piece::kAddress, .address = reinterpret_cast<std::uintptr_t>(p)});
    }
    void child(std::coroutine_handle<> frame) override { children_->push_back({frame.address(), false}); }
    void member(std::coroutine_handle<> frame) override { children_->push_back({frame.address(), true}); }
    void join(const FrameHeader* task) override {
        // The joiner's handle keeps the header alive; a finished task has left the registry.
        piece(Piece{.kind = Piece::kJoin,
                    .finished = (task->state.load(std::memory_order_acquire) & FrameHeader::kComplete) != 0,
                    .address = reinterpret_cast<std::uintptr_t>(task)});
    }
    void deadline(std::chrono::steady_clock::time_point t) override {
        piece(Piece{
            .kind = Piece::kDeadline,
            .n = static_cast<std::int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(t - now_).count())});
    }

private:
    struct Child {
        void* frame;
        bool has_header;  // a group member: named through its header
    };

    void piece(const Piece& p) { out_.pieces.push_back(p); }

    void collect_queued() {
        for (std::size_t i = 0; i < sched_.num_workers(); ++i) {
            sched_.worker(i).for_each_queued([&](void* item) { queued_.emplace(item, i); });
            if (void* held = sched_.pause().held(i)) queued_.emplace(held, i);  // about to run there
        }
        // The global queues cannot be looked into: take everything out, note it, put it back.
        // Every item goes back before anything that may throw: none may be lost.
        collect_global(sched_.global_wakes());
        collect_global(sched_.global_spawns());
        // The wake-ups went back: busy workers look at the global wake queue only when this
        // moves (Worker::take_global_wake), and may have found it empty meanwhile.
        sched_.note_global_wakes();
    }

    template <class T>
    void collect_global(InjectQueueOf<T>& q) {
        std::vector<T> all;
        try {
            all.reserve(q.size_approx() + 64);
        } catch (...) {
            return;  // no room to look: the global queue's tasks show their waits
        }
        T items[64];
        for (std::size_t n; all.size() + 64 <= all.capacity() && (n = q.pop_bulk(items, 64)) != 0;)
            all.insert(all.end(), items, items + n);  // within the reserved capacity: no throw
        for (const T& item : all) q.push(item);
        for (const T& item : all) global_.emplace(task_of(item));
    }

    void visit(void* frame, const char* kind, const FrameHeader* header, std::uint64_t id, std::size_t depth) {
        const std::size_t at = out_.records.size();
        out_.records.emplace_back();
        Record& r = out_.records.back();  // until the children's records are added
        r.id = id;
        r.kind = kind;
        if (depth >= kMaxDepth) {
            r.state = "not shown";
            r.too_deep = true;
            return;
        }
        if (header != nullptr && header->extra != nullptr && !header->extra->name.empty()) {
            r.name_at = static_cast<std::uint32_t>(out_.arena.size());
            r.name_len = static_cast<std::uint32_t>(header->extra->name.size());
            out_.arena += header->extra->name;
        }
        PromiseBase& p = promise_at(frame);
        if (const TaskCancellation* c = p.cancellation_scope()) r.cancelled = c->stop_requested();
        std::vector<Child> children;
        r.pieces_at = static_cast<std::uint32_t>(out_.pieces.size());
#if EDDY_TASK_DUMP
        const AwaitTrace& trace = p.trace_record();
        if (trace.vt->state != nullptr) {
            r.state = trace.vt->state;
        } else {
            r.file = trace.site.file();
            r.line = trace.site.line();
            r.waited = true;
            r.waited_ms = now_ms_ - trace.since_ms;
            if (trace.vt->describe != nullptr) {
                children_ = &children;
                trace.vt->describe(trace.awaiter, *this);  // may add records' pieces: not `r`
                children_ = nullptr;
            } else {
                r.untold = trace.vt;
            }
        }
#endif
        Record& rr = out_.records[at];
        rr.pieces_end = static_cast<std::uint32_t>(out_.pieces.size());
        if (const auto it = queued_.find(frame); it != queued_.end()) {
            rr.state = "runnable";
            rr.worker = static_cast<std::int32_t>(it->second);
        } else if (global_.contains(frame)) {
            rr.state = "runnable";
        }
        rr.children = static_cast<std::uint32_t>(children.size());
        for (const Child& c : children)
            visit(c.frame, "child", c.has_header ? header_of(c.frame) : nullptr, ++next_id_, depth + 1);
    }

    Scheduler& sched_;
    const std::chrono::steady_clock::time_point now_;
    [[maybe_unused]] const std::uint32_t now_ms_;  // read with the records only (task_dump)
    Captured& out_;
    std::uint64_t next_id_ = 0;
    std::unordered_map<void*, std::size_t> queued_;  // item -> worker
    std::unordered_set<void*> global_;
    std::vector<Child>* children_ = nullptr;
};

/// Step 2 (see the top): the tree out of the records, with the workers running.
class Build {
public:
    explicit Build(const Captured& c) : c_(c) {}

    std::vector<TaskDump::Task> roots() {
        std::vector<TaskDump::Task> out;
        out.reserve(c_.root_count);
        for (std::size_t i = 0; i < c_.root_count; ++i) out.push_back(task());
        return out;
    }

private:
    TaskDump::Task task() {
        const Record& r = c_.records[next_++];
        TaskDump::Task t;
        t.id = r.id;
        t.kind = r.kind;
        t.state = r.state;
        if (r.too_deep) {
            t.waits_on = "deeper than " + std::to_string(kMaxDepth) + " levels";
            return t;
        }
        t.name.assign(c_.arena, r.name_at, r.name_len);
        t.cancelled = r.cancelled;
        if (r.worker >= 0) t.worker = static_cast<std::size_t>(r.worker);
#if EDDY_TASK_DUMP
        if (r.file != nullptr) {
            t.site = trim_path(r.file);
            t.site += ':';
            t.site += std::to_string(r.line);
        }
        if (r.waited) t.waited = std::chrono::milliseconds(r.waited_ms);
        if (r.untold != nullptr) {
            auto [it, fresh] = type_names_.try_emplace(r.untold);
            if (fresh) it->second = type_name(*r.untold);
            t.waits_on = it->second;
        }
#endif
        for (std::uint32_t i = r.pieces_at; i < r.pieces_end; ++i) describe(c_.pieces[i], t.waits_on);
        t.children.reserve(r.children);
        for (std::uint32_t i = 0; i < r.children; ++i) t.children.push_back(task());
        return t;
    }

    void describe(const Piece& p, std::string& out) {
        switch (p.kind) {
        case Piece::kText:
            out.append(c_.arena, p.at, p.len);
            break;
        case Piece::kNumber:
            out += std::to_string(p.n);
            break;
        case Piece::kAddress: {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%p", reinterpret_cast<const void*>(p.address));
            out += buf;
            break;
        }
        case Piece::kJoin:
            if (const std::uint64_t id = root_id(p.address); id != 0) {
                out += "join task #";
                out += std::to_string(id);
            } else {
                out += p.finished ? "join a finished task" : "join a task of another runtime";
            }
            break;
        case Piece::kDeadline:
            if (p.n > 0) {
                out += ", ";
                out += std::to_string(p.n);
                out += " ms left";
            } else {
                out += ", due";
            }
            break;
        }
    }

    /// The dump id of the root whose header was at `h` (0: none of them).
    std::uint64_t root_id(std::uintptr_t h) {
        if (root_ids_.empty())
            for (std::size_t i = 0; i < c_.roots.size(); ++i) root_ids_.emplace(c_.roots[i], i + 1);
        const auto it = root_ids_.find(h);
        return it != root_ids_.end() ? it->second : 0;
    }

    const Captured& c_;
    std::size_t next_ = 0;
    std::unordered_map<std::uintptr_t, std::uint64_t> root_ids_;  // made at the first join
    std::unordered_map<const AwaitVT*, std::string> type_names_;
};

}  // namespace

/// The roots by name and kind, read under the registry's locks while workers run (names
/// never change after spawn): what a dump can say when some workers would not stop.
TaskDump partial_dump(Scheduler& sched, std::vector<std::size_t> busy) {
    TaskDump dump;
    dump.workers = sched.num_workers();
    dump.driver = sched.driver() != nullptr ? sched.driver()->kind() : IoDriver::io_uring;
    dump.complete = false;
    dump.busy_workers = std::move(busy);
    sched.registry().for_each_locked([&](FrameHeader* h) {
        TaskDump::Task t;
        t.id = ++dump.tasks;
        if (h->extra != nullptr) t.name = h->extra->name;
        t.kind = (h->state.load(std::memory_order_acquire) & FrameHeader::kThreadWaiting) != 0 ? "block_on" : "spawned";
        t.state = "unknown";
        dump.roots.push_back(std::move(t));
    });
    return dump;
}

TaskDump dump_scheduler(Scheduler& sched, bool from_worker, std::chrono::nanoseconds patience) {
    const std::size_t self = from_worker ? current_worker()->index() : 0;
    const auto asked = std::chrono::steady_clock::now();
    WorkerPause::Outcome paused = sched.pause().pause(from_worker ? &self : nullptr, patience);
    if (!paused.ok) throw RuntimeStopped("eddy: task dump of a runtime that is shutting down");
    if (!paused.busy.empty()) {
        const auto gave_up = std::chrono::steady_clock::now();  // the others were let go
        TaskDump dump = partial_dump(sched, std::move(paused.busy));
        dump.paused = gave_up - asked;
        return dump;
    }
    struct Resume {
        Scheduler& s;
        ~Resume() {
            s.pause().resume();
            s.notify_parked();  // the global queue's items were taken out and put back
        }
    };
    Captured captured;
    {
        Resume resume{sched};
        const auto now = std::chrono::steady_clock::now();
        refresh_coarse_clock(now);
        // Deadlines (sleeps, timeouts) are on the runtime's clock, virtual under a paused one;
        // how long a task has waited is real time.
        const auto clock_now = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(sched.clock().now_ns()));
        Capture(sched, clock_now, coarse_ms_of(now), captured).run(sched.registry().snapshot());
    }
    const auto resumed = std::chrono::steady_clock::now();
    TaskDump dump;
    dump.workers = sched.num_workers();
    dump.driver = sched.driver() != nullptr ? sched.driver()->kind() : IoDriver::io_uring;
    dump.tasks = captured.records.size();
    dump.roots = Build(captured).roots();
    dump.paused = resumed - asked;
    return dump;
}

}  // namespace eddy::detail

namespace eddy {

TaskDump Runtime::dump(std::chrono::nanoseconds patience) const {
    if (detail::current_scheduler() != nullptr)
        throw WrongThread("eddy::Runtime::dump called from a worker thread; co_await eddy::dump_tasks() instead");
    return detail::dump_scheduler(*scheduler_, false, patience);
}

}  // namespace eddy
