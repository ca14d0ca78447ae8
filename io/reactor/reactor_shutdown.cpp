// io/reactor/reactor_shutdown.cpp: how the reactor stops (Driver::shutdown, with every worker
// joined): its thread leaves the loop, cancels what the kernel holds and waits for every
// completion, so that no buffer in a frame is still in the kernel's hands when the scheduler
// destroys the frames (scheduler.hpp, shutdown step 2). See reactor.hpp for the flow.
#include "reactor/reactor.hpp"

#include "reactor/poll_state.hpp"
#include "time/timer_queue.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <vector>

namespace eddy::detail {

void Reactor::shutdown() noexcept {
    if (!thread_.joinable()) return;
    // Release: pairs with run()'s acquire load; nothing else is handed over.
    stop_.store(true, std::memory_order_release);
    const std::uint64_t one = 1;
    while (write(event_fd_, &one, sizeof one) < 0 && errno == EINTR) {
    }
    thread_.join();
}

void Reactor::drop_inbox() noexcept {
    for (ReactorNode* n = inbox_.exchange(nullptr, std::memory_order_acquire); n != nullptr;) {
        ReactorNode* next = n->next;
        if (n->kind == ReactorNode::Kind::kPollArm || n->kind == ReactorNode::Kind::kPollCancel) {
            PollState* s = PollState::of(n);
            // An arm request: wakes the waiters of other runtimes (poll_state.hpp, "Runtimes").
            if (n->kind == ReactorNode::Kind::kPollArm) s->disarm_for_shutdown(this);
            s->release();  // the node's reference
        }
        n = next;
    }
}

void Reactor::drain_for_shutdown() noexcept try {
    // Every worker is joined: nothing new arrives except cancel requests from other
    // threads, which are moot now, and close()'s poll cancels from other threads (looked
    // at again at the end). Nodes in the inbox never reached the kernel; their frames are
    // destroyed by the scheduler's shutdown step 4.
    drop_inbox();
    retry_ = nullptr;
    for (auto& q : timer_queues_) q->clear();
    // Ask the kernel to give back every buffer it holds, then wait until it has.
    // (Collected first: start_cancel() may reap, which edits the in-flight list.)
    std::vector<Operation*> held;
    for (Operation* op = in_flight_; op != nullptr; op = op->next_in_flight)
        if (op->stage == Operation::Stage::kInFlight || op->stage == Operation::Stage::kPolling) held.push_back(op);
    std::vector<PollState*> polls;
    for (PollState* s = armed_; s != nullptr; s = s->next_armed_) polls.push_back(s);
    for (Operation* op : held) start_cancel(op);
    for (PollState* s : polls) {
        io_uring_sqe* sqe = next_sqe();
        io_uring_prep_cancel64(sqe, reinterpret_cast<std::uintptr_t>(s) | kStateBit, 0);
        io_uring_sqe_set_data64(sqe, kIgnoreTag);
        ++pending_cqes_;
    }
    if (wake_armed_) {
        io_uring_sqe* sqe = next_sqe();
        io_uring_prep_cancel64(sqe, kWakeTag, 0);
        io_uring_sqe_set_data64(sqe, kIgnoreTag);
        ++pending_cqes_;
    }
    while (pending_cqes_ > 0) {
        const int r = io_uring_submit_and_wait(&ring_, 1);
        if (r < 0 && r != -EINTR && r != -EBUSY && r != -EAGAIN && r != -ETIME) {
            std::fprintf(stderr, "eddy: reactor: waiting for cancelled operations failed: %s\n", std::strerror(-r));
            break;
        }
        reap();
        retry_ = nullptr;  // nothing is resubmitted now
    }
    ready_.clear();  // never resumed: the scheduler destroys these frames
    // Every socket poll of ours has ended: a close() from another thread posted its cancel
    // before that (under the state's lock, poll_state.hpp), so it is in the inbox now, and
    // none comes later. Their references are dropped here.
    drop_inbox();
    in_flight_ = nullptr;
    publish_gauges();  // nothing left: the figures say so
} catch (const std::bad_alloc&) {
    std::fputs("eddy: reactor: out of memory while cancelling operations at shutdown\n", stderr);
    std::terminate();  // frames still in the kernel's hands cannot be destroyed safely
}

}  // namespace eddy::detail
