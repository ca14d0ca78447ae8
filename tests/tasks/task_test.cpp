// tests/tasks/task_test.cpp: Task<T> on its own, without a runtime or threads.
//
// Tasks are driven by `Driver`, a minimal eager coroutine that awaits one Task and keeps its
// outcome. Nothing in tasks/ needs a thread, so every completion below happens inside the
// `drive(...)` call, except where a test suspends a task at a `Gate` (a manual resume point)
// and resumes it by hand, writing the interleaving down instead of hoping for it.
#include <doctest/doctest.h>

#include <coroutine>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <eddy/tasks/errors.hpp>
#include <eddy/tasks/task.hpp>

#include "support/counted.hpp"

using eddy::Task;
using eddy::test::Counted;
using eddy::test::LifetimeCounter;

namespace {

// ---------------------------------------------------------------------------------------------
// The test driver.

struct DriverPromiseBase {
    std::suspend_never initial_suspend() const noexcept { return {}; }
    // Suspends at the end, so the Driver owns the frame and can report done().
    std::suspend_always final_suspend() const noexcept { return {}; }
    void unhandled_exception() noexcept { error = std::current_exception(); }
    void rethrow_if_failed() const {
        if (error) std::rethrow_exception(error);
    }
    std::exception_ptr error;
};

template <class T>
struct DriverPromise : DriverPromiseBase {
    void return_value(T v) { value.emplace(std::move(v)); }
    T take() {
        rethrow_if_failed();
        return std::move(*value);
    }
    std::optional<T> value;
};

template <class T>
struct DriverPromise<T&> : DriverPromiseBase {
    void return_value(T& v) noexcept { value = &v; }
    T& take() {
        rethrow_if_failed();
        return *value;
    }
    T* value = nullptr;
};

template <>
struct DriverPromise<void> : DriverPromiseBase {
    void return_void() noexcept {}
    void take() { rethrow_if_failed(); }
};

/// An eager coroutine that owns its frame: starts at once, keeps its result or exception.
template <class T>
class [[nodiscard]] Driver {
public:
    struct promise_type : DriverPromise<T> {
        Driver get_return_object() noexcept { return Driver(std::coroutine_handle<promise_type>::from_promise(*this)); }
    };

    Driver(Driver&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
    Driver& operator=(Driver&&) = delete;
    ~Driver() {
        if (handle_) handle_.destroy();
    }

    bool done() const noexcept { return handle_.done(); }
    /// The awaited task's result, or its exception rethrown. Only once done().
    T take() { return handle_.promise().take(); }

private:
    explicit Driver(std::coroutine_handle<promise_type> h) noexcept : handle_(h) {}
    std::coroutine_handle<promise_type> handle_;
};

/// Awaits `task` (as an lvalue, so the caller can inspect it afterwards).
template <class T>
Driver<T> drive(Task<T>& task) {
    co_return co_await task;
}

/// Awaits `task` as an rvalue (`co_await std::move(task)`).
template <class T>
Driver<T> drive_moved(Task<T>& task) {
    co_return co_await std::move(task);
}

/// Runs `task` to completion on this thread and returns its result (or rethrows).
template <class T>
T sync_await(Task<T>& task) {
    Driver<T> d = drive(task);
    REQUIRE(d.done());  // without a runtime, every task here completes synchronously
    return d.take();
}
template <class T>
T sync_await(Task<T>&& task) {
    return sync_await(task);
}

/// A manual resume point: a coroutine awaiting it stays suspended until the test resumes it.
struct Gate {
    std::coroutine_handle<> waiter;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) noexcept { waiter = h; }
    void await_resume() const noexcept {}
};

// ---------------------------------------------------------------------------------------------
// Tasks under test.

Task<int> value(int v) { co_return v; }

Task<void> set_flag(bool& flag) {
    flag = true;
    co_return;
}

Task<int&> ref_to(int& x) { co_return x; }

Task<std::unique_ptr<int>> boxed(int v) { co_return std::make_unique<int>(v); }

Task<std::string> text() { co_return std::string(100, 'x'); }  // past any small-string buffer

struct CustomError : std::runtime_error {
    explicit CustomError(int c) : std::runtime_error("custom"), code(c) {}
    int code;
};

Task<int> fail_with(int code) {
    throw CustomError(code);
    co_return 0;
}

Task<void> fail_void() {
    throw std::runtime_error("void boom");
    co_return;
}

Task<int> plus_one(Task<int> inner) { co_return 1 + co_await std::move(inner); }

Task<int> catch_and_recover() {
    try {
        co_await fail_with(7);
    } catch (const CustomError& e) {
        co_return e.code;
    }
    co_return -1;
}

/// Keeps a Counted in its frame (the parameter copy) and returns its value.
Task<int> hold(Counted c) { co_return c.value(); }

/// Keeps a Counted in its frame and fails.
Task<int> hold_and_fail(Counted c) {
    throw std::runtime_error(std::to_string(c.value()));
    co_return 0;
}

Task<Counted> make_counted(LifetimeCounter& counter, int v) { co_return Counted(counter, v); }

/// Awaits `t` and reports, from inside the awaiter, how many Counted objects are alive and
/// whether the Task was emptied: that is the state right after the result was taken.
struct AfterTake {
    int value;
    int alive;
    bool task_valid;
};
Driver<AfterTake> take_and_observe(Task<Counted>& t, LifetimeCounter& counter) {
    Counted result = co_await t;
    co_return AfterTake{result.value(), counter.alive(), t.valid()};
}

/// Suspends at `gate` with a live local, then returns 1.
Task<int> wait_at(Gate& gate, LifetimeCounter& counter) {
    Counted local(counter);
    co_await gate;
    co_return 1;
}

/// Adds one per level: a chain of `n` nested awaits that all complete synchronously.
Task<int> chain(int n) {
    if (n == 0) co_return 0;
    co_return 1 + co_await chain(n - 1);
}

}  // namespace

TEST_SUITE("tasks/task") {

// ---------------------------------------------------------------------------------------------
// Laziness

TEST_CASE("a task doesn't start until awaited") {
    bool started = false;
    Task<void> t = set_flag(started);
    CHECK_FALSE(started);
    CHECK(t.valid());
    sync_await(t);
    CHECK(started);
}

TEST_CASE("a task destroyed without being awaited never runs") {
    bool started = false;
    { Task<void> t = set_flag(started); }
    CHECK_FALSE(started);
}

TEST_CASE("a moved task runs once, where it is awaited") {
    bool started = false;
    Task<void> a = set_flag(started);
    Task<void> b = std::move(a);
    CHECK_FALSE(started);
    CHECK_FALSE(a.valid());
    CHECK(b.valid());
    sync_await(b);
    CHECK(started);
}

// ---------------------------------------------------------------------------------------------
// Results

TEST_CASE("co_await gives the co_return value") { CHECK(sync_await(value(42)) == 42); }

TEST_CASE("co_await std::move(task) gives the co_return value") {
    Task<int> t = value(5);
    Driver<int> d = drive_moved(t);
    REQUIRE(d.done());
    CHECK(d.take() == 5);
    CHECK_FALSE(t.valid());
}

TEST_CASE("a Task<void> completes and runs its body") {
    bool ran = false;
    Task<void> t = set_flag(ran);
    Driver<void> d = drive(t);
    REQUIRE(d.done());
    CHECK_NOTHROW(d.take());
    CHECK(ran);
}

TEST_CASE("a Task<T&> gives a reference to the outside object, not a copy") {
    int outside = 3;
    int& r = sync_await(ref_to(outside));
    CHECK(&r == &outside);
    r = 9;
    CHECK(outside == 9);
}

TEST_CASE("a move-only result is moved out to the awaiter") {
    std::unique_ptr<int> p = sync_await(boxed(17));
    REQUIRE(p != nullptr);
    CHECK(*p == 17);
}

TEST_CASE("a heap-allocated result arrives intact") { CHECK(sync_await(text()) == std::string(100, 'x')); }

TEST_CASE("nested awaits compose results") { CHECK(sync_await(plus_one(plus_one(value(1)))) == 3); }

TEST_CASE("a task that suspends resumes its awaiter when it finishes") {
    LifetimeCounter counter;
    Gate gate;
    Task<int> t = wait_at(gate, counter);
    Driver<int> d = drive(t);
    CHECK_FALSE(d.done());
    REQUIRE(gate.waiter);
    CHECK(counter.alive() == 1);  // the local of the suspended task
    gate.waiter.resume();
    REQUIRE(d.done());
    CHECK(d.take() == 1);
    CHECK(counter.alive() == 0);
    CHECK_FALSE(t.valid());
}

// ---------------------------------------------------------------------------------------------
// Exceptions

TEST_CASE("an exception escaping a task is rethrown to its awaiter") {
    Task<int> t = fail_with(11);
    Driver<int> d = drive(t);
    REQUIRE(d.done());
    try {
        (void)d.take();
        FAIL("no exception");
    } catch (const CustomError& e) {
        CHECK(e.code == 11);  // the same exception, type and payload preserved
    }
}

TEST_CASE("an exception escaping a Task<void> is rethrown to its awaiter") {
    CHECK_THROWS_WITH_AS(sync_await(fail_void()), "void boom", std::runtime_error);
}

TEST_CASE("an awaiting task can catch its child's exception and continue") {
    CHECK(sync_await(catch_and_recover()) == 7);
}

TEST_CASE("an exception crosses several levels of nested awaits") {
    CHECK_THROWS_AS(sync_await(plus_one(plus_one(fail_with(1)))), CustomError);
}

// ---------------------------------------------------------------------------------------------
// Misuse: awaiting an empty task

TEST_CASE("awaiting a moved-from task throws BrokenTask") {
    Task<int> a = value(1);
    Task<int> b = std::move(a);
    CHECK_THROWS_AS(sync_await(a), eddy::BrokenTask);
    CHECK(sync_await(b) == 1);  // the moved-to task is unaffected
}

TEST_CASE("awaiting a default-constructed task throws BrokenTask") {
    Task<int> t;
    CHECK_FALSE(t.valid());
    CHECK_FALSE(static_cast<bool>(t));
    CHECK_THROWS_AS(sync_await(t), eddy::BrokenTask);
}

TEST_CASE("awaiting a default-constructed Task<void> throws BrokenTask") {
    Task<void> t;
    CHECK_THROWS_AS(sync_await(t), eddy::BrokenTask);
}

TEST_CASE("awaiting an already-awaited task throws BrokenTask") {
    Task<int> t = value(2);
    CHECK(sync_await(t) == 2);
    CHECK_FALSE(t.valid());
    CHECK_THROWS_AS(sync_await(t), eddy::BrokenTask);
}

TEST_CASE("awaiting a task whose exception was already rethrown throws BrokenTask") {
    Task<int> t = fail_with(3);
    CHECK_THROWS_AS(sync_await(t), CustomError);
    CHECK_FALSE(t.valid());
    CHECK_THROWS_AS(sync_await(t), eddy::BrokenTask);
}

// ---------------------------------------------------------------------------------------------
// Frame lifetime

TEST_CASE("destroying a never-awaited task destroys its frame") {
    LifetimeCounter counter;
    {
        Task<int> t = hold(Counted(counter, 1));
        CHECK(counter.alive() == 1);  // the parameter copy in the frame
    }
    CHECK(counter.alive() == 0);
    CHECK(counter.constructions() >= 1);
}

TEST_CASE("destroying a suspended task destroys its frame and locals") {
    LifetimeCounter counter;
    Gate gate;
    {
        Task<int> t = wait_at(gate, counter);
        Driver<int> d = drive(t);
        REQUIRE_FALSE(d.done());
        CHECK(counter.alive() == 1);
        // The driver is destroyed first (it is never resumed), then the task, mid-suspension.
    }
    CHECK(counter.alive() == 0);
}

TEST_CASE("move-assigning over a task destroys the frame it held") {
    LifetimeCounter counter;
    Task<int> t = hold(Counted(counter, 1));
    CHECK(counter.alive() == 1);
    t = value(2);
    CHECK(counter.alive() == 0);
    CHECK(sync_await(t) == 2);
}

TEST_CASE("the frame is destroyed once the result is taken") {
    LifetimeCounter counter;
    Task<int> t = hold(Counted(counter, 4));
    CHECK(sync_await(t) == 4);
    CHECK_FALSE(t.valid());
    CHECK(counter.alive() == 0);
}

TEST_CASE("the frame and its stored result are destroyed when the awaiter receives the result") {
    LifetimeCounter counter;
    Task<Counted> t = make_counted(counter, 8);
    Driver<AfterTake> d = take_and_observe(t, counter);
    REQUIRE(d.done());
    const AfterTake seen = d.take();
    CHECK(seen.value == 8);
    CHECK(seen.alive == 1);  // only the awaiter's copy: the promise's copy went with the frame
    CHECK_FALSE(seen.task_valid);
    CHECK(counter.alive() == 0);
}

TEST_CASE("the frame of a failed task is destroyed once its exception is rethrown") {
    LifetimeCounter counter;
    Task<int> t = hold_and_fail(Counted(counter, 6));
    CHECK_THROWS_WITH_AS(sync_await(t), "6", std::runtime_error);
    CHECK(counter.alive() == 0);
}

// ---------------------------------------------------------------------------------------------
// Stack depth

// Awaiting and finishing are symmetric transfers, so a million nested awaits that complete
// synchronously use constant stack. Needs real tail calls: any clang build, or g++ at -O2 and
// above (the project does not run g++ -O0/-O1 or g++ with sanitizers; see the README).
TEST_CASE("a million nested awaits that complete synchronously do not overflow the stack") {
    CHECK(sync_await(chain(1'000'000)) == 1'000'000);
}

}  // TEST_SUITE("tasks/task")
