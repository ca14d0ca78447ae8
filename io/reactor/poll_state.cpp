// io/reactor/poll_state.cpp: see poll_state.hpp (the state) and eddy/net/detail/socket_io.hpp
// (the protocol as a socket operation sees it).
#include "reactor/poll_state.hpp"

#include "reactor/reactor.hpp"

#include <poll.h>
#include <unistd.h>

#include <mutex>

namespace eddy::detail {
PollState::PollState(int fd, Reactor& reactor) noexcept : fd_(fd), reactor_(&reactor) {}

PollState::~PollState() {
    if (fd_ >= 0) ::close(fd_);
}

void PollState::release() noexcept {
    // Acq_rel: release publishes this holder's writes; the last holder acquires them all
    // before closing and freeing.
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

void PollState::link(PollWaiter* w, Dir d) noexcept {
    w->prev_ = tail_[d];
    w->next_ = nullptr;
    (tail_[d] != nullptr ? tail_[d]->next_ : head_[d]) = w;
    tail_[d] = w;
    w->linked_ = true;
}

void PollState::unlink(PollWaiter* w, Dir d) noexcept {
    (w->prev_ != nullptr ? w->prev_->next_ : head_[d]) = w->next_;
    (w->next_ != nullptr ? w->next_->prev_ : tail_[d]) = w->prev_;
    w->prev_ = w->next_ = nullptr;
    w->linked_ = false;
}

void PollState::take(Dir d, PollWaiter*& chain) noexcept {
    // Prepends d's waiters to `chain` (through next_), oldest first, each unlinked.
    PollWaiter* w = tail_[d];
    while (w != nullptr) {
        PollWaiter* prev = w->prev_;
        w->linked_ = false;
        w->prev_ = nullptr;
        w->next_ = chain;
        chain = w;
        w = prev;
    }
    head_[d] = tail_[d] = nullptr;
}

void PollState::wake_foreign(PollWaiter*& chain, const Reactor* local) noexcept {
    PollWaiter** link = &chain;
    while (PollWaiter* w = *link) {
        if (w->home_ == local) {
            link = &w->next_;
            continue;
        }
        *link = w->next_;  // read before the push: the waiter may run at once
        schedule_runnable_on(&w->home_->host().scheduler(), w);
    }
}

const Reactor* PollState::bound_reactor() noexcept {
    std::lock_guard lock(lock_);
    return reactor_;
}

PollState::Queue PollState::queue(PollWaiter* w, Dir d, std::uint32_t seen) noexcept {
    lock_.lock();
    if (w->cancelled_) {
        lock_.unlock();
        w->result_ = -ECANCELED;
        return Queue::kSettled;
    }
    if (closed_) {
        lock_.unlock();
        w->result_ = w->closed_result_;
        return Queue::kSettled;
    }
    // Relaxed under the lock: every writer of a bumped word holds it (the CAS of a short
    // read only ever clears `ready` of the word it read, so it cannot hide an event).
    if (word_[d].load(std::memory_order_relaxed) != seen) {
        lock_.unlock();
        return Queue::kRetry;  // an event came after the attempt: try again
    }
    word_[d].store(seen & ~kReady, std::memory_order_relaxed);
    link(w, d);
    const bool arm = arm_ == Arm::kIdle;
    if (arm) {
        // Idle: nothing of the bound runtime holds the state (no poll, no waiter), so it
        // may be gone. Arm on the waiter's runtime, which is alive: we run on its worker.
        reactor_ = w->home_;
        arm_ = Arm::kArming;
        add_ref();  // the arm node's, then the armed poll's
    }
    Reactor* const target = reactor_;
    lock_.unlock();
    // `w` may be woken and gone from here on; the state lives on (the node's reference).
    if (arm) target->post_any(arm_node());
    return Queue::kQueued;
}

void PollState::leave(PollWaiter* w) noexcept {
    std::lock_guard lock(lock_);
    if (w->linked_) unlink(w, w->dir_);
}

void PollState::cancel(PollWaiter* w) noexcept {
    lock_.lock();
    w->cancelled_ = true;
    const bool resume = w->linked_;
    if (resume) {
        unlink(w, w->dir_);
        w->result_ = -ECANCELED;
    }
    const std::coroutine_handle<> frame = w->frame_;
    Scheduler* const home = &w->home_->host().scheduler();
    lock_.unlock();
    // Its runtime is alive: a frame destroyed by its shutdown first waits for this callback.
    if (resume) schedule_on(home, frame);  // the last touch of w
}

void PollState::close() noexcept {
    PollWaiter* woken = nullptr;
    Reactor* const here = this_thread_reactor();  // null off a worker
    lock_.lock();
    closed_ = true;
    closed_flag_.store(true, std::memory_order_release);  // pairs with closed()
    take(kRead, woken);
    take(kWrite, woken);
    // Waiters of other runtimes than ours, now (see "Runtimes"); ours after the lock.
    wake_foreign(woken, here);
    const bool cancel = arm_ != Arm::kIdle;
    if (cancel) add_ref();  // the cancel node's
    // Armed or arming: the bound reactor is alive (its shutdown ends the poll first). Off
    // its workers, post while the state cannot go idle, so that the shutdown's last look at
    // its inbox sees the node.
    Reactor* const bound = reactor_;
    const bool post_now = cancel && bound != here;
    if (post_now) bound->post(cancel_node());
    lock_.unlock();
    while (woken != nullptr) {
        PollWaiter* next = woken->next_;
        schedule_runnable_on(&here->host().scheduler(), woken);  // the retry sees the socket shut down
        woken = next;
    }
    if (cancel && !post_now) bound->post(cancel_node());
    release();  // the socket's reference
}

bool PollState::begin_arm() noexcept {
    std::lock_guard lock(lock_);
    if (closed_) {
        arm_ = Arm::kIdle;
        return false;
    }
    arm_ = Arm::kArmed;
    return true;
}

void PollState::on_event(std::int32_t res, bool more, std::vector<void*>& ready) noexcept {
    // An error (the poll cancelled, or failed) or a final completion concerns both directions.
    const bool all = res < 0 || !more;
    const auto revents = static_cast<std::uint32_t>(res);
    const bool readable = all || (revents & (POLLIN | POLLPRI | POLLRDHUP | POLLHUP | POLLERR)) != 0;
    const bool writable = all || (revents & (POLLOUT | POLLHUP | POLLERR)) != 0;
    // The end of the stream (or an error) stays: a short read that takes the last bytes
    // before it must not clear `ready`, since no event will come again.
    const std::uint32_t read_final = (revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0 && res > 0 ? kFinal : 0;
    const std::uint32_t write_final = (revents & (POLLHUP | POLLERR)) != 0 && res > 0 ? kFinal : 0;
    PollWaiter* woken = nullptr;
    lock_.lock();
    if (readable) {
        const std::uint32_t w = word_[kRead].load(std::memory_order_relaxed);
        word_[kRead].store((w | kReady | read_final) + kTickOne, std::memory_order_release);
        take(kRead, woken);
    }
    if (writable) {
        const std::uint32_t w = word_[kWrite].load(std::memory_order_relaxed);
        word_[kWrite].store((w | kReady | write_final) + kTickOne, std::memory_order_release);
        take(kWrite, woken);
    }
    if (!more) arm_ = Arm::kIdle;
    wake_foreign(woken, reactor_);  // the reactor calling us is the bound one
    lock_.unlock();
    for (; woken != nullptr; woken = woken->next_) ready.push_back(queue_item(woken));
}

void PollState::disarm_for_shutdown(const Reactor* local) noexcept {
    PollWaiter* woken = nullptr;
    std::lock_guard lock(lock_);
    arm_ = Arm::kIdle;
    // Idle again: no waiter may stay (the next one to queue would arm for all of them).
    take(kRead, woken);
    take(kWrite, woken);
    wake_foreign(woken, local);
    // What is left belongs to the runtime shutting down: its frames are destroyed with it.
}

}  // namespace eddy::detail
