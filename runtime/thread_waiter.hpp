// runtime/thread_waiter.hpp: a thread blocked until a task completes (Runtime::block_on).
//
// Lives on the waiting thread's stack. The completer signals under the mutex, so the waiter
// cannot see `done_` and return (destroying this object) until signal() has released the
// mutex: POSIX allows destroying a mutex right after its last unlock, which is exactly this.
// (A bare atomic flag plus futex wake would touch the object after the waiter may be gone.)
#pragma once

#include "private.hpp"

#include <condition_variable>
#include <mutex>

namespace eddy::detail {

class ThreadWaiter {
public:
    void wait() {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [this] { return done_; });
    }
    void signal() {
        std::lock_guard lock(mutex_);
        done_ = true;
        cv_.notify_one();
    }

private:
    std::mutex mutex_;
    std::condition_variable cv_;
    bool done_ = false;  // guarded by mutex_
};

}  // namespace eddy::detail
