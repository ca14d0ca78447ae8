// io/reactor/reactor.cpp: the reactor's loop (see reactor.hpp for the flow and operation.hpp
// for the cancel protocol). How an operation or a socket's poll goes into the ring and comes
// back is in reactor_io.cpp; the ring's set-up and thread start in reactor_setup.cpp; how it
// sleeps and is woken, in reactor_sleep.cpp; how it stops and gives every buffer back, in
// reactor_shutdown.cpp.
#include "reactor/reactor.hpp"

#include "reactor/epoll_state.hpp"
#include "reactor/poll_state.hpp"
#include "time/timer_queue.hpp"

#include <unistd.h>

#include <eddy/runtime/detail/clock.hpp>
#include <eddy/runtime/detail/scheduler_api.hpp>
#include <eddy/runtime/metrics.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

namespace eddy::detail {

void Reactor::post(ReactorNode& node) noexcept {
    push(node);
    wake_if_sleeping();
}

void Reactor::post_deferred(ReactorNode& node) noexcept {
    push(node);
    // Seq_cst: pairs with sleep_in_kernel()'s store of its sleep kind and its re-check of the
    // inbox, like wake_if_sleeping(). An unbounded sleeper would not come back for the node
    // by itself: wake it now (see reactor.hpp). A bounded one looks within a millisecond.
    if (sleeping_.load(std::memory_order_seq_cst) == kSleepingUnbounded) {
        wake_if_sleeping();
        return;
    }
    // submit() runs on a worker of this reactor's runtime (current_reactor checked that).
    DriverHost::note_driver_work();
}

void Reactor::post_any(ReactorNode& node) noexcept {
    if (host_.current_worker_index() != DriverHost::kNotAWorker) {
        post_deferred(node);
    } else {
        post(node);
    }
}

void Reactor::flush() noexcept { wake_if_sleeping(); }

void Reactor::push(ReactorNode& node) noexcept {
    ReactorNode* head = inbox_.load(std::memory_order_relaxed);
    do {
        node.next = head;
        // Seq_cst: release publishes the node to take_inbox()'s exchange; seq_cst orders
        // the push before wake_if_sleeping()'s load (pairs with sleep_in_kernel()).
    } while (!inbox_.compare_exchange_weak(head, &node, std::memory_order_seq_cst, std::memory_order_relaxed));
    // From here on `node` may already be resumed and gone: only the reactor is touched.
}

void Reactor::run() noexcept {
    while (true) {
        take_inbox();
        // Retries first: they may need SQEs, which reap() never takes.
        for (ReactorNode* n = std::exchange(retry_, nullptr); n != nullptr;) {
            ReactorNode* next = n->next;
            auto* op = static_cast<IoOperation*>(n);
            if (op->cancel_arrived) complete(op, -ECANCELED);
            else if (op->stage == Operation::Stage::kPolling) submit_poll(op);
            else start_io(op);
            n = next;
        }
        reap();
        if (epoll_ != nullptr) epoll_fire_deadlines();
        fire_timers();
        flush_ready();
        publish_gauges();
        // Acquire: pairs with shutdown()'s release store.
        if (stop_.load(std::memory_order_acquire)) break;
        if (retry_ != nullptr) {
            kernel_poll_now();
            continue;
        }
        sleep_in_kernel();
    }
    if (epoll_ != nullptr) epoll_drain();
    else drain_for_shutdown();
}

void Reactor::kernel_poll_now() {
    if (epoll_ == nullptr) io_uring_submit_and_get_events(&ring_);  // GETEVENTS: deferred completions run too
}

void Reactor::take_inbox() {
    // Acquire: pairs with post()'s CAS; every node's fields are visible.
    ReactorNode* list = inbox_.exchange(nullptr, std::memory_order_acquire);
    if (time_io_ && list != nullptr) clock_ns_ = steady_now_ns();  // the operations' taken_ns
    // The stack holds newest first; reverse it so operations start in the order posted.
    ReactorNode* fifo = nullptr;
    while (list != nullptr) {
        ReactorNode* next = list->next;
        list->next = fifo;
        fifo = list;
        list = next;
    }
    while (fifo != nullptr) {
        ReactorNode* next = fifo->next;
        handle_node(fifo);
        fifo = next;
    }
}

void Reactor::handle_node(ReactorNode* node) {
    switch (node->kind) {
    case ReactorNode::Kind::kIo: {
        auto* op = static_cast<IoOperation*>(node);
        if (epoll_ != nullptr && epoll_pool_returned(op)) return;  // a file pool call ended
        stat_operations_.add();
        op->taken_ns = clock_ns_;
        if (op->cancel_arrived) {
            complete(op, -ECANCELED);
        } else {
            track(op);
            start_io(op);
        }
        return;
    }
    case ReactorNode::Kind::kCancel: {
        Operation* op = static_cast<CancelNode*>(node)->target;
        op->cancel_arrived = true;
        switch (op->stage) {
        case Operation::Stage::kNew:     // the operation's own node comes later
        case Operation::Stage::kQueued:  // on the retry list, which checks cancel_arrived
            return;
        case Operation::Stage::kInFlight:
        case Operation::Stage::kPolling:
            start_cancel(op);
            return;
        case Operation::Stage::kAwaitingCancel:  // completed, waiting for this very node
            op->stage = Operation::Stage::kDone;
            ready_.push_back(op->waiter.address());
            return;
        case Operation::Stage::kDone:
            return;
        }
        return;
    }
    case ReactorNode::Kind::kPollArm:
        arm_poll(PollState::of(node));
        return;
    case ReactorNode::Kind::kPollCancel:
        cancel_poll(PollState::of(node));
        return;
    }
}

io_uring_sqe* Reactor::next_sqe() {
    for (;;) {
        if (io_uring_sqe* sqe = io_uring_get_sqe(&ring_)) {
            stat_submissions_.add();
            return sqe;
        }
        make_room();  // the SQ is full: take the slot again after
    }
}

void Reactor::make_room() {
    const int r = io_uring_submit(&ring_);
    if (r == -EBUSY || r == -EAGAIN) {
        // The kernel holds back submissions until we make room in the CQ (or it is out
        // of memory for a moment): reap, flush any overflow backlog, retry.
        reap();
        io_uring_get_events(&ring_);
        if (io_uring_cq_ready(&ring_) == 0) std::this_thread::yield();
    } else if (r < 0 && r != -EINTR) {
        // Not a passing condition (the ring itself is unusable): nothing in flight can
        // complete any more, so no frame could ever be resumed or safely destroyed.
        std::fprintf(stderr, "eddy: reactor: io_uring_submit failed: %s\n", std::strerror(-r));
        std::abort();
    }
}

void Reactor::reap() {
    if (epoll_ != nullptr) {
        epoll_reap();
        return;
    }
    for (;;) {
        io_uring_cqe* cqes[64];
        const unsigned n = io_uring_peek_batch_cqe(&ring_, cqes, 64);
        if (time_io_ && n > 0) clock_ns_ = steady_now_ns();  // the completions' time (io_latency_)
        for (unsigned i = 0; i < n; ++i) handle_cqe(cqes[i]->user_data, cqes[i]->res, cqes[i]->flags);
        io_uring_cq_advance(&ring_, n);
        if (n == 64) continue;
        if (io_uring_cq_has_overflow(&ring_)) {
            // CQ overflowed: the kernel kept the extra completions (FEAT_NODROP); have it
            // move them into the ring now that there is room.
            io_uring_get_events(&ring_);
            continue;
        }
        return;
    }
}

void Reactor::fire_timers() {
    // Collected under each queue's lock, acted on after it (timer_queue.hpp).
    const std::int64_t now = timer_now();
    for (auto& q : timer_queues_) {
        if (q->earliest() > now) continue;
        q->pop_expired(now, [this, now](TimerEntry& e) {
            stat_timers_fired_.add();
            if (e.action == TimerEntry::Action::kResume) {
                e.result = 0;
                timer_ready_.push_back(e.waiter.address());  // resumed after this round: e stays
                // How long ago it became due (none on a virtual clock, which jumps to it).
                timer_late_.push_back(virtual_ ? 0 : now - e.deadline_ns);
            } else {
                retain_timeout(e.timeout);  // the awaiter may go once we unlock
                stops_.push_back(e.timeout);
            }
        });
    }
    for (TimeoutScope* s : stops_) fire_timeout(s);  // with_timeout: cancels the task
    stops_.clear();
    if (!timer_ready_.empty()) {
        host_.deliver_late(timer_ready_.data(), timer_late_.data(), timer_ready_.size());
        timer_ready_.clear();
        timer_late_.clear();
    }
}

std::int64_t Reactor::earliest_timer() const noexcept {
    std::int64_t earliest = TimerQueue::kNone;
    for (const auto& q : timer_queues_) earliest = std::min(earliest, q->earliest());
    return earliest;
}

void Reactor::timer_armed(std::int64_t deadline_ns) noexcept {
    // Seq_cst: after the queue's seq_cst store of its new earliest deadline; pairs with
    // sleep_in_kernel()'s store of wake_at_ and its second look (timer_queue.hpp).
    if (deadline_ns < wake_at_.load(std::memory_order_seq_cst)) wake_if_sleeping();
}

void Reactor::flush_ready() {
    if (ready_.empty()) return;
    host_.deliver(ready_.data(), ready_.size());
    ready_.clear();
}

void Reactor::publish_gauges() noexcept {
    stat_in_flight_.set(pending_cqes_);
    stat_polled_.set(polled_);
}

void Reactor::track(Operation* op) noexcept {
    op->prev_in_flight = nullptr;
    op->next_in_flight = in_flight_;
    if (in_flight_ != nullptr) in_flight_->prev_in_flight = op;
    in_flight_ = op;
}

void Reactor::untrack(Operation* op) noexcept {
    if (op->prev_in_flight == nullptr && in_flight_ != op) return;  // not on the list
    if (op->prev_in_flight != nullptr) op->prev_in_flight->next_in_flight = op->next_in_flight;
    else in_flight_ = op->next_in_flight;
    if (op->next_in_flight != nullptr) op->next_in_flight->prev_in_flight = op->prev_in_flight;
    op->prev_in_flight = op->next_in_flight = nullptr;
}

// --- the entry points of eddy/io/detail/operation.hpp ----------------------------------------

Reactor& current_reactor(const char* what) { return static_cast<Reactor&>(require_driver(what)); }

bool reactor_has_waitid(const Reactor& reactor) noexcept { return reactor.has_waitid(); }

Reactor* this_thread_reactor() noexcept { return static_cast<Reactor*>(this_thread_driver()); }

void submit(Reactor& reactor, Operation& op) noexcept { reactor.post_deferred(op); }

ReactorMetrics Reactor::metrics() const noexcept {
    ReactorMetrics m;
    m.driver = kind();
    m.driver_note = driver_note_;
    m.operations = stat_operations_.get();
    m.submissions = stat_submissions_.get();
    m.completions = stat_completions_.get();
    m.timers_fired = stat_timers_fired_.get();
    m.wakeups = stat_wakeups_.load(std::memory_order_relaxed);
    m.in_flight = static_cast<std::size_t>(stat_in_flight_.get());
    // Live: timers are armed and disarmed on the workers, without the reactor.
    for (const auto& q : timer_queues_) m.timers_armed += q->size();
    m.sockets_polled = static_cast<std::size_t>(stat_polled_.get());
    for (std::size_t i = 0; i < kIoOpKinds; ++i) m.io_latency[i] = io_latency_[i].snapshot();
    return m;
}

void request_cancel(Operation& op) noexcept {
    // Acq_rel: pairs with complete()'s fetch_or (see operation.hpp). The node is posted at
    // most once: a second request (the task's cancellation after the call's own token) finds
    // kCancelRequested set.
    constexpr std::uint8_t kEither = Operation::kCancelRequested | Operation::kCompleted;
    if ((op.cancel_flags.fetch_or(Operation::kCancelRequested, std::memory_order_acq_rel) & kEither) == 0)
        op.reactor->post(op.cancel_node);
}

std::unique_ptr<Driver> make_driver(DriverHost& host) {
    const unsigned entries = host.config().ring_entries;
    if (entries < 1 || entries > 32768)
        throw std::invalid_argument("eddy: RuntimeConfig::ring_entries is " + std::to_string(entries) +
                                    "; it must be between 1 and 32768");
    switch (host.config().driver) {
    case IoDriver::io_uring:
        return std::make_unique<Reactor>(host, entries);
    case IoDriver::epoll:
        return std::make_unique<Reactor>(host, Reactor::ReadinessDriver{}, std::string());
    case IoDriver::automatic:
        break;
    }
    try {
        return std::make_unique<Reactor>(host, entries);
    } catch (const std::system_error& e) {
        // Refused, not failed: a seccomp filter or security policy (EPERM, EACCES), the
        // sysctl, or a kernel without io_uring or too old for it (ENOSYS). Anything else (no
        // lockable memory, a descriptor limit) is the configuration's to fix: thrown as is.
        const int err = e.code().value();
        if (e.code().category() != std::system_category() || (err != EPERM && err != EACCES && err != ENOSYS)) throw;
        std::string why = e.what();
        if (why.rfind("eddy: ", 0) == 0) why.erase(0, 6);
        // Said once per process: a program that builds a runtime per request must not
        // flood its log. ReactorMetrics::driver_note says it for every runtime.
        static std::atomic<bool> said{false};
        if (!said.exchange(true, std::memory_order_relaxed))
            std::fprintf(stderr, "eddy: %s; using the readiness driver (epoll)\n", why.c_str());
        return std::make_unique<Reactor>(host, Reactor::ReadinessDriver{}, std::move(why));
    }
}

}  // namespace eddy::detail
