// TaskGroup::spawn of an awaitable that gives a value: refused (a member gives none).
#include <coroutine>

#include <eddy/eddy.hpp>

struct Answer {
    bool await_ready() const noexcept { return true; }
    void await_suspend(std::coroutine_handle<>) const noexcept {}
    int await_resume() const noexcept { return 42; }
};

eddy::Task<void> f() {
    co_await eddy::task_group([](eddy::TaskGroup& g) -> eddy::Task<void> {
        g.spawn(Answer{});
        co_return;
    });
}
