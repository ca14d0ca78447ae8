// spawn() of an awaiter of one's own that cannot move: refused (spawn must own it).
#include <coroutine>

#include <eddy/eddy.hpp>

struct Pinned {
    Pinned() = default;
    Pinned(Pinned&&) = delete;
    bool await_ready() const noexcept { return true; }
    void await_suspend(std::coroutine_handle<>) const noexcept {}
    int await_resume() const noexcept { return 1; }
};

eddy::Task<void> f() {
    eddy::spawn(Pinned{});
    co_return;
}
