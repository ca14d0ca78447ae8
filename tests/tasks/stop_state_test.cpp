// tests/tasks/stop_state_test.cpp: eddy's own stop source (eddy/tasks/detail/stop_state.hpp)
// and the lazily linked source of a combinator (LinkedStopSource), without a runtime. The
// cross-thread cases order their steps with atomics (no sleeps decide anything).
#include <doctest/doctest.h>

#include <atomic>
#include <stop_token>
#include <thread>
#include <vector>

#include <eddy/tasks/detail/stop_state.hpp>
#include <eddy/tasks/detail/task_cancellation.hpp>

using eddy::detail::LinkedStopSource;
using eddy::detail::StopCallback;
using eddy::detail::StopState;
using eddy::detail::TaskCancellation;

namespace {

struct Count {
    std::atomic<int>* n;
    void operator()() const noexcept { n->fetch_add(1); }
};

void spin_until(const std::atomic<bool>& flag) {
    while (!flag.load()) std::this_thread::yield();
}

}  // namespace

TEST_CASE("request_stop runs each registered callback once and only the first call stops") {
    StopState s;
    std::atomic<int> n{0};
    StopCallback<Count> a, b, c;
    a.emplace(s, Count{&n});
    b.emplace(s, Count{&n});
    c.emplace(s, Count{&n});
    CHECK_FALSE(s.stop_requested());
    CHECK(n.load() == 0);
    CHECK(s.request_stop());
    CHECK(s.stop_requested());
    CHECK(n.load() == 3);
    CHECK_FALSE(s.request_stop());
    CHECK(n.load() == 3);
}

TEST_CASE("a callback registered on a stopped state runs at once, and is not registered") {
    StopState s;
    s.request_stop();
    std::atomic<int> n{0};
    StopCallback<Count> a;
    a.emplace(s, Count{&n});
    CHECK(n.load() == 1);
    a.reset();  // nothing to unregister
    CHECK(n.load() == 1);
}

TEST_CASE("a reset callback does not run; the others still do") {
    StopState s;
    std::atomic<int> n{0};
    StopCallback<Count> a, b, c;
    a.emplace(s, Count{&n});
    b.emplace(s, Count{&n});
    c.emplace(s, Count{&n});
    b.reset();
    b.reset();  // idempotent
    {
        StopCallback<Count> d;
        d.emplace(s, Count{&n});
    }  // its destructor unregisters it
    s.request_stop();
    CHECK(n.load() == 2);
}

TEST_CASE("reset of a callback running on another thread waits until it has returned") {
    StopState s;
    std::atomic<bool> entered{false}, release{false}, finished{false}, reset_done{false};
    struct Slow {
        std::atomic<bool>* entered;
        std::atomic<bool>* release;
        std::atomic<bool>* finished;
        void operator()() const noexcept {
            entered->store(true);
            spin_until(*release);
            finished->store(true);
        }
    };
    StopCallback<Slow> cb;
    cb.emplace(s, Slow{&entered, &release, &finished});
    std::thread stopper([&] { s.request_stop(); });
    spin_until(entered);
    bool finished_when_reset_returned = false;
    std::thread resetter([&] {
        cb.reset();
        finished_when_reset_returned = finished.load();
        reset_done.store(true);
    });
    std::this_thread::yield();
    CHECK_FALSE(reset_done.load());  // cannot return while the callback runs
    release.store(true);
    resetter.join();
    stopper.join();
    CHECK(reset_done.load());
    CHECK(finished_when_reset_returned);
}

TEST_CASE("a callback may reset itself, and register others, from inside its own call") {
    StopState s, other;
    std::atomic<int> n{0};
    struct SelfReset {
        StopCallback<SelfReset>* self;
        StopState* other;
        StopCallback<Count>* on_other;
        std::atomic<int>* n;
        void operator()() const noexcept {
            self->reset();                        // returns at once: no deadlock
            on_other->emplace(*other, Count{n});  // another state: registers
            n->fetch_add(10);
        }
    };
    StopCallback<SelfReset> cb;
    StopCallback<Count> on_other;
    cb.emplace(s, SelfReset{&cb, &other, &on_other, &n});
    s.request_stop();
    CHECK(n.load() == 10);
    other.request_stop();
    CHECK(n.load() == 11);
}

TEST_CASE("token() bridges to a std::stop_token that may outlive the state") {
    std::stop_token kept;
    {
        StopState s;
        std::stop_token t = s.token();
        CHECK(t.stop_possible());
        CHECK_FALSE(t.stop_requested());
        CHECK(s.token() == t);  // one bridge per state
        s.request_stop();
        CHECK(t.stop_requested());
        kept = s.token();
    }
    CHECK(kept.stop_requested());  // the std state lives on with the token
    std::stop_token late;
    {
        StopState s;
        s.request_stop();
        late = s.token();  // made after the stop: stopped at once
    }
    CHECK(late.stop_requested());
}

TEST_CASE("reset() makes a state new again and detaches the tokens handed out") {
    StopState s;
    std::stop_token before = s.token();
    s.reset();
    std::stop_token after = s.token();
    CHECK(after != before);
    s.request_stop();
    CHECK(after.stop_requested());
    CHECK_FALSE(before.stop_requested());  // detached: never stopped by this state any more
    s.reset();
    CHECK_FALSE(s.stop_requested());
    std::atomic<int> n{0};
    StopCallback<Count> a;
    a.emplace(s, Count{&n});
    CHECK(n.load() == 0);  // registered, not run
    s.request_stop();
    CHECK(n.load() == 1);
}

TEST_CASE("a linked source links to its parent only when asked for its state") {
    StopState root;
    TaskCancellation parent(&root);
    LinkedStopSource child(&parent);
    CHECK(child.token()->stop_possible());
    CHECK_FALSE(child.stop_requested());
    root.request_stop();  // not linked: nothing forwarded, but the child sees its parent's stop
    CHECK(child.stop_requested());
    StopState* s = child.get();  // links now; the parent is stopped: forwarded at once
    CHECK(s->stop_requested());
}

TEST_CASE("a linked source forwards a later stop of its parent, and its own stop stays below") {
    StopState root;
    TaskCancellation parent(&root);
    LinkedStopSource child(&parent);
    std::atomic<int> n{0};
    StopCallback<Count> on_child;
    on_child.emplace(*child.get(), Count{&n});
    LinkedStopSource sibling(&parent);
    CHECK(sibling.request_stop());  // stopped before it was ever linked
    CHECK(sibling.get()->stop_requested());
    CHECK_FALSE(root.stop_requested());
    CHECK(n.load() == 0);
    root.request_stop();
    CHECK(n.load() == 1);
    CHECK(child.stop_requested());
}

TEST_CASE("a linked source under an uncancellable parent links nothing and still stops") {
    LinkedStopSource top(nullptr);
    LinkedStopSource below(top.token());
    std::atomic<int> n{0};
    StopCallback<Count> cb;
    cb.emplace(*below.get(), Count{&n});
    top.request_stop();
    CHECK(n.load() == 1);
    CHECK(below.stop_requested());
}

TEST_CASE("share() gives an empty token where no stop can come, a live one otherwise") {
    TaskCancellation none;
    CHECK_FALSE(none.stop_possible());
    CHECK_FALSE(none.share().stop_possible());
    LinkedStopSource src(nullptr);
    std::stop_token t = src.token()->share();
    CHECK(t.stop_possible());
    src.request_stop();
    CHECK(t.stop_requested());
    TaskCancellation derived(src.token(), TaskCancellation::Derive{});
    CHECK(derived.stop_requested());
}

TEST_CASE("registrations, resets and a stop race on several threads: each callback runs at most once") {
    constexpr int kThreads = 4;
    constexpr int kRounds = 300;
    for (int round = 0; round < kRounds; ++round) {
        StopState s;
        std::atomic<int> ran{0};
        std::atomic<bool> go{false};
        std::atomic<int> most{0};  // the most runs any one callback saw
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t) {
            threads.emplace_back([&] {
                spin_until(go);
                for (int i = 0; i < 8; ++i) {
                    std::atomic<int> mine{0};
                    StopCallback<Count> cb;
                    cb.emplace(s, Count{&mine});
                    if ((i & 1) != 0) std::this_thread::yield();
                    cb.reset();  // after this, `mine` can no longer change
                    const int seen = mine.load();
                    int prev = most.load();
                    while (seen > prev && !most.compare_exchange_weak(prev, seen)) {
                    }
                    ran.fetch_add(seen);
                }
            });
        }
        go.store(true);
        if ((round & 1) != 0) std::this_thread::yield();
        s.request_stop();
        for (auto& th : threads) th.join();
        CHECK(most.load() <= 1);
        CHECK(ran.load() <= kThreads * 8);
        CHECK(s.stop_requested());
    }
}

TEST_CASE("once the parent has stopped, polls read true while another thread links the source") {
    for (int round = 0; round < 2000; ++round) {
        StopState root;
        TaskCancellation parent(&root);
        LinkedStopSource child(&parent);
        root.request_stop();  // not linked yet: nothing forwarded
        std::atomic<bool> go{false};
        std::thread linker([&] {
            spin_until(go);
            (void)child.get();  // links now, forwarding the parent's stop
        });
        go.store(true);
        bool always = true;
        for (int i = 0; i < 50; ++i) always = child.stop_requested() && always;
        linker.join();
        CHECK(always);
        CHECK(child.stop_requested());
    }
}
