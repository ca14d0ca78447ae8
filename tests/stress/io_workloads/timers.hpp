// tests/stress/io_workloads/timers.hpp: the timer workload of io_stress (case 3, and the
// shutdown's sleepers): many short sleeps, some cancelled through the board of cancel.hpp,
// with pipe round trips in between.
#pragma once

#include <eddy/io/pipe.hpp>
#include <eddy/tasks/task.hpp>
#include <eddy/time/sleep.hpp>

#include "support/io_helpers.hpp"
#include "stress/io_workloads/bookkeeping.hpp"
#include "stress/io_workloads/cancel.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>
#include <stop_token>
#include <string>
#include <system_error>

namespace eddy::test::io_stress {

// ---- Timers --------------------------------------------------------------------------------

/// `sleeps` short sleeps (0-3 ms), a third of them cancellable through `slot`; between
/// them, often a small round trip through the sleeper's own pipe. A sleep that completes
/// must not be early; one that is cancelled may end either way.
inline Task<void> sleeper(Ctx& ctx, Counted, CancelBoard& board, std::size_t slot, int sleeps, std::uint64_t stream,
                          Rng r) {
    try {
        auto p = eddy::io::pipe();
        std::uint64_t pos = 0;
        std::array<std::byte, 64> out;
        std::array<std::byte, 64> in;
        for (int i = 0; i < sleeps; ++i) {
            const auto d = std::chrono::microseconds(r.below(3001));
            const bool may_cancel = r.one_in(3);
            std::stop_token token;
            if (may_cancel) token = cancellable(ctx, board, slot, r, 2, 3ms);
            const auto start = Clock::now();
            // sleep() measures from its own now(), which is later than `start`.
            Clock::time_point due = start + d;
            try {
                switch (r.below(3)) {
                case 0:
                    co_await eddy::sleep(d, token);
                    break;
                case 1:
                    co_await eddy::sleep_until(due, token);
                    break;
                default:
                    // On a 500 us grid: many sleepers share the very same deadline.
                    due =
                        Clock::time_point((due.time_since_epoch() / 500us + 1) *
                                          std::chrono::duration_cast<Clock::duration>(std::chrono::microseconds(500)));
                    co_await eddy::sleep_until(due, token);
                    break;
                }
                if (Clock::now() < due) {
                    ctx.sleeps_early.fetch_add(1);
                    ctx.problems.add("a sleep of " + std::to_string(d.count()) + " us completed early");
                }
            } catch (const std::system_error& e) {
                if (!may_cancel || !is_canceled(e)) throw;
                ctx.sleeps_canceled.fetch_add(1);
            }
            ctx.sleeps_done.fetch_add(1);
            ctx.progress.fetch_add(1);
            if (r.one_in(2)) {
                const std::size_t n = 1 + r.below(out.size());
                fill_stream(std::span(out).first(n), stream, pos);
                co_await eddy::test::write_all(p.write_end.get(), std::span(out).first(n));
                const std::size_t got = co_await eddy::test::read_exact(p.read_end.get(), std::span(in).first(n));
                if (got != n || !matches_stream(std::span(in).first(n), stream, pos))
                    ctx.problems.add("sleeper pipe " + std::to_string(stream) + ": wrong round trip");
                pos += n;
                ctx.bytes_checked.fetch_add(static_cast<long>(n));
            }
        }
        ctx.tasks_done.fetch_add(1);
    } catch (const std::exception& e) {
        ctx.failed("sleeper", e);
    }
}

}  // namespace eddy::test::io_stress
