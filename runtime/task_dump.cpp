// runtime/task_dump.cpp: walking a paused runtime's tasks into a TaskDump
// (eddy/runtime/task_dump.hpp; the text and JSON forms are in task_dump_format.cpp).
//
// With every worker paused (worker_pause.hpp), each frame is suspended in the awaiter its
// record names, not started, or finished (await_trace.hpp), and nothing but the reactor and
// the blocking threads runs: they may wake a task (queue it) but never resume or destroy one.
// The walk:
//   1. collects what the workers' queues hold (LIFO slots, deques, yielded tasks) and the
//      global queue's items (taken out and pushed back), to tell runnable tasks;
//   2. numbers the registry's root tasks first, so that "join task #n" can name any of them;
//   3. visits each root depth first: its record, its awaiter's description (dump_wait), and
//      the children that description lists.
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

class Walker final : public DumpWait {
public:
    Walker(Scheduler& sched, std::chrono::steady_clock::time_point now, std::uint32_t now_ms)
        : sched_(sched), now_(now), now_ms_(now_ms) {}

    TaskDump run(const std::vector<FrameHeader*>& roots) {
        TaskDump dump;
        dump.workers = sched_.num_workers();
        collect_queued();
        for (FrameHeader* h : roots) root_ids_.emplace(h, ++next_id_);
        for (FrameHeader* h : roots) {
            const std::uint32_t s = h->state.load(std::memory_order_acquire);
            dump.roots.push_back(
                visit(h->frame(), (s & FrameHeader::kThreadWaiting) != 0 ? "block_on" : "spawned", h, root_ids_[h], 0));
        }
        dump.tasks = next_id_;
        return dump;
    }

    // DumpWait: the awaiter of the task being visited describes its wait.
    void text(std::string_view s) override { cur_->waits_on += s; }
    void number(std::int64_t n) override { cur_->waits_on += std::to_string(n); }
    void address(const void* p) override {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%p", p);
        cur_->waits_on += buf;
    }
    void child(std::coroutine_handle<> frame) override { children_->push_back({frame.address(), false}); }
    void member(std::coroutine_handle<> frame) override { children_->push_back({frame.address(), true}); }
    void join(const FrameHeader* task) override {
        // The joiner's handle keeps the header alive; a finished task has left the registry.
        const auto it = root_ids_.find(task);
        if (it != root_ids_.end()) {
            cur_->waits_on += "join task #" + std::to_string(it->second);
        } else if ((task->state.load(std::memory_order_acquire) & FrameHeader::kComplete) != 0) {
            cur_->waits_on += "join a finished task";
        } else {
            cur_->waits_on += "join a task of another runtime";
        }
    }
    void deadline(std::chrono::steady_clock::time_point t) override {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t - now_).count();
        cur_->waits_on += left > 0 ? ", " + std::to_string(left) + " ms left" : ", due";
    }

private:
    static constexpr std::size_t kMaxDepth = 256;

    struct Child {
        void* frame;
        bool has_header;  // a group member: named through its header
    };

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

    TaskDump::Task visit(void* frame, const char* kind, const FrameHeader* header, std::uint64_t id,
                         std::size_t depth) {
        TaskDump::Task t;
        t.id = id;
        t.kind = kind;
        if (depth >= kMaxDepth) {  // the walk, the formats and the tree's destructor recurse
            t.state = "not shown";
            t.waits_on = "deeper than " + std::to_string(kMaxDepth) + " levels";
            return t;
        }
        if (header != nullptr && header->extra != nullptr) t.name = header->extra->name;
        PromiseBase& p = promise_at(frame);
        if (const TaskCancellation* c = p.cancellation_scope()) t.cancelled = c->stop_requested();
        std::vector<Child> children;
#if EDDY_TASK_DUMP
        const AwaitTrace& trace = p.trace_record();
        if (trace.vt->state != nullptr) {
            t.state = trace.vt->state;
        } else {
            t.state = "suspended";
            if (const char* file = trace.site.file())
                t.site = std::string(trim_path(file)) + ":" + std::to_string(trace.site.line());
            t.waited = std::chrono::milliseconds(static_cast<std::uint32_t>(now_ms_ - trace.since_ms));
            if (trace.vt->describe != nullptr) {
                cur_ = &t;
                children_ = &children;
                trace.vt->describe(trace.awaiter, *this);
                cur_ = nullptr;
                children_ = nullptr;
            } else {
                t.waits_on = type_name(*trace.vt);
            }
        }
#else
        t.state = "suspended";
#endif
        if (const auto it = queued_.find(frame); it != queued_.end()) {
            t.state = "runnable";
            t.worker = it->second;
        } else if (global_.contains(frame)) {
            t.state = "runnable";
        }
        for (const Child& c : children) {
            const FrameHeader* h = c.has_header ? header_of(c.frame) : nullptr;
            t.children.push_back(visit(c.frame, "child", h, ++next_id_, depth + 1));
        }
        return t;
    }

    Scheduler& sched_;
    const std::chrono::steady_clock::time_point now_;
    [[maybe_unused]] const std::uint32_t now_ms_;  // read with the records only (task_dump)
    std::uint64_t next_id_ = 0;
    std::unordered_map<const FrameHeader*, std::uint64_t> root_ids_;
    std::unordered_map<void*, std::size_t> queued_;  // item -> worker
    std::unordered_set<void*> global_;
    TaskDump::Task* cur_ = nullptr;
    std::vector<Child>* children_ = nullptr;
};

}  // namespace

/// The roots by name and kind, read under the registry's locks while workers run (names
/// never change after spawn): what a dump can say when some workers would not stop.
TaskDump partial_dump(Scheduler& sched, std::vector<std::size_t> busy) {
    TaskDump dump;
    dump.workers = sched.num_workers();
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
    TaskDump dump;
    {
        Resume resume{sched};
        const auto now = std::chrono::steady_clock::now();
        refresh_coarse_clock(now);
        // Deadlines (sleeps, timeouts) are on the runtime's clock, virtual under a paused one;
        // how long a task has waited is real time.
        const auto clock_now = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(sched.clock().now_ns()));
        Walker walker(sched, clock_now, coarse_ms_of(now));
        dump = walker.run(sched.registry().snapshot());
    }
    dump.paused = std::chrono::steady_clock::now() - asked;
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
