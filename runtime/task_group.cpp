// runtime/task_group.cpp: see eddy/runtime/task_group.hpp.
#include <eddy/runtime/task_group.hpp>
#include <eddy/runtime/detail/task_name.hpp>

#include <eddy/runtime/detail/children.hpp>

#include <mutex>

namespace eddy {

TaskGroup::~TaskGroup() {
    // Only at shutdown: normally every member unlinked itself before the group completed.
    // No worker runs then, so no member can finish concurrently.
    for (detail::FrameHeader* h = members_; h != nullptr;) {
        detail::FrameHeader* next = h->next;
        h->handle().destroy();
        h = next;
    }
}

std::coroutine_handle<> TaskGroup::start(std::coroutine_handle<> parent, const detail::TaskCancellation* parent_scope,
                                         Task<void>& body) {
    if (!body) throw BrokenTask("eddy::task_group: the body returned an empty task");
    parent_scope_ = parent_scope;
    stop_.emplace(parent_scope);  // may throw (allocation): nothing started yet
    parent_ = parent;
    auto h = detail::TaskAccess::get(body);
    body_ = detail::header_of(h.address());
    adopt(body);
    // The body runs now, on this worker (symmetric transfer); the parent is already suspended
    // and is resumed by the last member's completion.
    return h;
}

void TaskGroup::spawn(Task<void> child) {
    if (!child) throw BrokenTask("eddy::TaskGroup::spawn: the task is empty (moved-from or already awaited)");
    detail::Scheduler& sched = detail::require_worker("eddy::TaskGroup::spawn");
    auto h = detail::TaskAccess::get(child);
    adopt(child);
    detail::schedule_on(&sched, h);
}

void TaskGroup::dump_members(detail::DumpWait& d) const {
    std::lock_guard lock(members_lock_);
    std::size_t n = 0;
    for (const detail::FrameHeader* h = members_; h != nullptr; h = h->next) ++n;
    d.text("task_group, ");
    d.number(static_cast<std::int64_t>(n));
    d.text(n == 1 ? " member" : " members");
    if (cancelled()) d.text(", cancelling");
    // Oldest first: members_ is newest first.
    std::vector<detail::FrameHeader*> members;
    for (detail::FrameHeader* h = members_; h != nullptr; h = h->next) members.push_back(h);
    for (auto it = members.rbegin(); it != members.rend(); ++it) d.member((*it)->handle());
}

void TaskGroup::spawn(Task<void> child, std::string_view name) {
    if (!child) throw BrokenTask("eddy::TaskGroup::spawn: the task is empty (moved-from or already awaited)");
    detail::name_task(detail::TaskAccess::get(child), name);  // on failure `child` still owns its frame
    spawn(std::move(child));
}

void TaskGroup::adopt(Task<void>& member) {
    auto h = detail::TaskAccess::release(member);
    detail::PromiseBase& p = h.promise();
    p.set_finish(&member_hook_);
    p.set_cancellation(stop_->token());
    detail::FrameHeader* header = detail::header_of(h.address());
    {
        std::lock_guard lock(members_lock_);
        header->prev = nullptr;
        header->next = members_;
        if (members_ != nullptr) members_->prev = header;
        members_ = header;
    }
    live_.fetch_add(1, std::memory_order_relaxed);  // see live_
}

void TaskGroup::cancel() noexcept {
    if (stop_) stop_->request_stop();
}

void TaskGroup::record_failure(const std::exception_ptr& e, bool from_body) noexcept {
    // The OperationCancelled that the group's own cancellation caused is the expected way
    // for a member to stop, not a failure.
    if (stop_->stop_requested() && detail::is_cancellation(e)) return;
    if (on_child_error_ && !from_body) {
        try {
            on_child_error_(e);  // supervising: the others run on
            return;
        } catch (...) {
            record_failure(std::current_exception(), true);  // the handler failed: the group fails
            return;
        }
    }
    bool expected = false;
    // Relaxed: first_error_ is published to the parent by live_'s acq_rel chain.
    if (failed_.compare_exchange_strong(expected, true, std::memory_order_relaxed)) {
        first_error_ = e;
        stop_->request_stop();  // cancel the other members; they still count down
    }
}

std::coroutine_handle<> TaskGroup::on_member_done(void* ctx, detail::PromiseBase& p,
                                                  std::coroutine_handle<> self) noexcept {
    auto* g = static_cast<TaskGroup*>(ctx);
    detail::FrameHeader* h = detail::header_of(self.address());
    if (p.exception()) g->record_failure(p.exception(), h == g->body_);
    {
        std::lock_guard lock(g->members_lock_);
        if (h->prev != nullptr) {
            h->prev->next = h->next;
        } else {
            g->members_ = h->next;
        }
        if (h->next != nullptr) h->next->prev = h->prev;
    }
    // A finished member is freed at once (its frame is suspended at its final point, so it
    // may be destroyed here); the group's awaiter resumes only after every frame is gone.
    self.destroy();
    // SAFETY: once the count is down, the group may complete and vanish on another worker:
    // `g` is not touched after the decrement unless this was the last member.
    if (g->live_.fetch_sub(1, std::memory_order_acq_rel) == 1) return g->parent_;
    return std::noop_coroutine();
}

void TaskGroup::finish() const {
    if (first_error_) std::rethrow_exception(first_error_);
    if (parent_scope_ != nullptr && parent_scope_->stop_requested())
        throw OperationCancelled("eddy::task_group: the group's awaiter was cancelled");
}

}  // namespace eddy
