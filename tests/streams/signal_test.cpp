// tests/streams/signal_test.cpp: io::SignalSet: the constructor blocks the signals and opens a
// close-on-exec signalfd; a signal sent to the process (kill(getpid(), ...)) reaches a task
// waiting for it, whether it arrives before or during the wait; two signals of one set; a
// wait cancelled through its stop_token or through eddy::with_stop_token throws
// OperationCancelled and consumes nothing; bad signal numbers are rejected.
//
// Every SignalSet is constructed before the Runtime of its test case, so the workers and the
// reactor thread inherit the blocked mask; signals go only to this process, and each test
// case reads every signal it sends (a pending one would leak into the next case).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <set>
#include <stdexcept>
#include <stop_token>
#include <utility>
#include <vector>

#include <eddy/io/signal.hpp>
#include <eddy/runtime/runtime.hpp>
#include <eddy/runtime/when_all.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/cancellation.hpp>
#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/net_helpers.hpp"

using eddy::Runtime;
using eddy::RuntimeConfig;
using eddy::Task;
using eddy::io::SignalSet;
using eddy::test::run;

namespace {

bool blocked_here(int sig) {
    sigset_t now;
    REQUIRE(::pthread_sigmask(SIG_BLOCK, nullptr, &now) == 0);
    return sigismember(&now, sig) == 1;
}

/// Sends `sig` to this process after a few yields, so the waiter usually suspends first
/// (either order must work).
Task<void> send_later(int sig) {
    for (int i = 0; i < 20; ++i) co_await eddy::yield_now();
    REQUIRE(::kill(::getpid(), sig) == 0);
}

Task<int> wait_for(SignalSet& set) { co_return co_await set.wait(); }

Task<int> receive_while_waiting(SignalSet& set, int sig) {
    auto [got, sent] = co_await eddy::when_all(wait_for(set), send_later(sig));
    (void)sent;
    co_return got;
}

}  // namespace

TEST_CASE("SignalSet: blocks its signals in the constructing thread and opens a close-on-exec signalfd") {
    SignalSet set{SIGUSR1};
    CHECK(set.fd() >= 0);
    CHECK((::fcntl(set.fd(), F_GETFD) & FD_CLOEXEC) != 0);
    CHECK(blocked_here(SIGUSR1));

    SignalSet moved(std::move(set));
    CHECK(set.fd() == -1);
    CHECK(moved.fd() >= 0);
}

TEST_CASE("SignalSet: kill(getpid(), SIGUSR1) reaches a task waiting for it") {
    SignalSet set{SIGUSR1};
    for (const std::size_t workers : {std::size_t{1}, std::size_t{2}}) {
        CAPTURE(workers);
        Runtime rt(RuntimeConfig{.workers = workers});
        CHECK(run(rt, receive_while_waiting(set, SIGUSR1)) == SIGUSR1);
        // A signal already pending when the wait starts is received at once.
        REQUIRE(::kill(::getpid(), SIGUSR1) == 0);
        CHECK(run(rt, wait_for(set)) == SIGUSR1);
        // Several in turn, each one waited for.
        for (int i = 0; i < 5; ++i) CHECK(run(rt, receive_while_waiting(set, SIGUSR1)) == SIGUSR1);
    }
}

namespace {

Task<std::multiset<int>> receive_both(SignalSet& set) {
    REQUIRE(::kill(::getpid(), SIGUSR1) == 0);
    REQUIRE(::kill(::getpid(), SIGUSR2) == 0);
    std::multiset<int> got;
    got.insert(co_await set.wait());
    got.insert(co_await set.wait());
    co_return got;
}

Task<std::multiset<int>> two_waiters(SignalSet& set) {
    auto [a, b, sent1, sent2] =
        co_await eddy::when_all(wait_for(set), wait_for(set), send_later(SIGUSR2), send_later(SIGUSR1));
    (void)sent1;
    (void)sent2;
    co_return std::multiset<int>{a, b};
}

}  // namespace

TEST_CASE("SignalSet: two signals in one set, each received once, by one waiter or by two") {
    SignalSet set{SIGUSR1, SIGUSR2};
    CHECK(blocked_here(SIGUSR1));
    CHECK(blocked_here(SIGUSR2));
    Runtime rt(RuntimeConfig{.workers = 2});
    CHECK(run(rt, receive_both(set)) == std::multiset<int>{SIGUSR1, SIGUSR2});
    CHECK(run(rt, two_waiters(set)) == std::multiset<int>{SIGUSR1, SIGUSR2});
}

namespace {

enum class Ended { signal, cancelled, other };

Task<Ended> classify(Task<int> wait) {
    try {
        (void)co_await std::move(wait);
        co_return Ended::signal;
    } catch (const eddy::OperationCancelled&) {
        co_return Ended::cancelled;
    } catch (...) {
        co_return Ended::other;
    }
}

Task<void> stop_later(std::stop_source& source) {
    for (int i = 0; i < 20; ++i) co_await eddy::yield_now();
    source.request_stop();
}

struct Cancelled {
    Ended by_token = Ended::other, by_with_stop_token = Ended::other, already_stopped = Ended::other;
    int afterwards = 0;
};

Task<Cancelled> cancelled_waits(SignalSet& set) {
    Cancelled c;
    {
        std::stop_source source;
        auto [ended, stopped] = co_await eddy::when_all(classify(set.wait(source.get_token())), stop_later(source));
        (void)stopped;
        c.by_token = ended;
    }
    {
        std::stop_source source;
        auto [ended, stopped] = co_await eddy::when_all(classify(eddy::with_stop_token(set.wait(), source.get_token())),
                                                        stop_later(source));
        (void)stopped;
        c.by_with_stop_token = ended;
    }
    {
        std::stop_source source;
        source.request_stop();
        c.already_stopped = co_await classify(set.wait(source.get_token()));
    }
    // The cancelled waits consumed nothing, and the set still works.
    REQUIRE(::kill(::getpid(), SIGUSR1) == 0);
    c.afterwards = co_await set.wait();
    co_return c;
}

}  // namespace

TEST_CASE("SignalSet: a wait cancelled through its stop_token or eddy::with_stop_token throws OperationCancelled") {
    SignalSet set{SIGUSR1};
    Runtime rt(RuntimeConfig{.workers = 2});
    const Cancelled c = run(rt, cancelled_waits(set));
    CHECK(c.by_token == Ended::cancelled);
    CHECK(c.by_with_stop_token == Ended::cancelled);
    CHECK(c.already_stopped == Ended::cancelled);
    CHECK(c.afterwards == SIGUSR1);
}

TEST_CASE("SignalSet: bad signal numbers and an empty list are std::invalid_argument") {
    for (const int bad : {0, -1, SIGRTMAX + 1, 1000, SIGKILL, SIGSTOP}) {
        CAPTURE(bad);
        CHECK_THROWS_AS(SignalSet{bad}, std::invalid_argument);
        CHECK_THROWS_AS((SignalSet{SIGUSR2, bad}), std::invalid_argument);
    }
    CHECK_THROWS_AS(SignalSet(std::span<const int>{}), std::invalid_argument);
    const std::vector<int> good{SIGRTMAX, SIGRTMIN};
    CHECK_NOTHROW(SignalSet{good});
}
