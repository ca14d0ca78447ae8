// runtime/coop.cpp: the budget's thread-local and its slow path (eddy/runtime/detail/
// coop_budget.hpp).
#include <eddy/runtime/detail/coop_budget.hpp>

#include "worker.hpp"

#include <new>

namespace eddy::detail {

[[gnu::tls_model("initial-exec")]] constinit thread_local std::uint32_t t_coop_budget = kCoopUnlimited;

bool coop_exhausted(std::coroutine_handle<> h, bool unconstrained) noexcept {
    Worker* w = current_worker();
    if (unconstrained || w == nullptr) {
        t_coop_budget = kCoopBudget;
        return false;
    }
    try {
        w->defer(h.address());
    } catch (const std::bad_alloc&) {
        return false;  // no room to queue it: go on, and try again at the next operation
    }
    t_coop_budget = 0;
    w->stats().budget_yields.add();
    return true;
}

}  // namespace eddy::detail
