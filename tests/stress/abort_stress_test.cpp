// tests/stress/abort_stress_test.cpp: aborts racing completions (spawn_abortable, AbortHandle,
// JoinSet).
//
// Every round a JoinSet takes members of four kinds: one that returns at once, one that
// yields first, one that sleeps 0-2 ms, and one that waits on an Event nobody sets (only an
// abort ends it). A plain thread aborts a random half of the members at random moments, every
// waiting one among them, while the owner takes results with join_next; some rounds end with
// abort_all racing the last completions, some drop the set with members still running.
//
// Checked exactly: every member ends once, as its own value or as TaskAborted (never both,
// never lost), a member that was never aborted always gives its value, every waiting member
// is aborted, and every frame is destroyed (each member holds an eddy::test::Counted). TSan
// and LeakSanitizer watch the rest.
#include <eddy/eddy.hpp>

#include "support/counted.hpp"
#include "support/stress_rounds.hpp"
#include "support/tsan.hpp"

#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <random>
#include <thread>
#include <utility>
#include <vector>

using eddy::Task;
using eddy::test::Counted;
using eddy::test::LifetimeCounter;
using namespace std::chrono_literals;

namespace {

#ifdef EDDY_TEST_TSAN
constexpr int kRounds = 4;
constexpr int kMembers = 120;
#else
constexpr int kRounds = 12;
constexpr int kMembers = 400;
#endif
constexpr std::array<std::size_t, 3> kWorkers{1, 2, 4};

enum class Kind { immediate, yields, sleeps, waits };

Task<int> member(Kind kind, int id, unsigned sleep_us, eddy::Event& never, Counted) {
    switch (kind) {
    case Kind::immediate:
        break;
    case Kind::yields:
        co_await eddy::yield_now();
        break;
    case Kind::sleeps:
        co_await eddy::sleep(std::chrono::microseconds(sleep_us));
        break;
    case Kind::waits:
        co_await never;
        break;
    }
    co_return id;
}

struct Tally {
    int values = 0;
    int aborted = 0;
    int wrong = 0;  // a value that is not the member's id, or a value from a waiting member
};

}  // namespace

TEST_CASE("JoinSet members aborted at random by a plain thread: each ends once, as its value or TaskAborted") {
    std::uint64_t seed = 20261125;
    eddy::test::for_each_stress_configuration("stress/abort", kWorkers, kRounds, [&seed](std::size_t workers) {
        std::mt19937_64 rng(seed++);
        LifetimeCounter frames;
        eddy::Event never;
        std::vector<Kind> kinds(kMembers);
        std::vector<bool> to_abort(kMembers);
        for (int i = 0; i < kMembers; ++i) {
            kinds[i] = static_cast<Kind>(rng() % 4);
            to_abort[i] = kinds[i] == Kind::waits || rng() % 2 == 0;
        }
        const int ending = static_cast<int>(rng() % 3);  // 0: join all, 1: abort_all at the end, 2: drop the set
        Tally tally;
        {
            eddy::Runtime rt(eddy::RuntimeConfig{.workers = workers});
            rt.block_on([&]() -> Task<void> {
                eddy::JoinSet<int> set;
                std::vector<eddy::AbortHandle> handles;
                for (int i = 0; i < kMembers; ++i)
                    handles.push_back(
                        set.spawn(member(kinds[i], i, static_cast<unsigned>(rng() % 2000), never, Counted(frames, i))));
                std::thread aborter([&handles, &to_abort, thread_seed = rng()] {
                    std::mt19937_64 r(thread_seed);
                    for (std::size_t i = 0; i < handles.size(); ++i) {
                        if (!to_abort[i]) continue;
                        if (r() % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(r() % 200));
                        handles[i].abort();
                    }
                });
                if (ending == 2) {
                    aborter.join();
                    co_return;  // the set goes with members still running: they are aborted
                }
                for (int taken = 0; taken < kMembers; ++taken) {
                    if (ending == 1 && taken == kMembers - 10) set.abort_all();
                    try {
                        auto v = co_await set.join_next();
                        if (!v) break;
                        ++tally.values;
                        if (*v < 0 || *v >= kMembers || kinds[*v] == Kind::waits) ++tally.wrong;
                    } catch (const eddy::TaskAborted&) {
                        ++tally.aborted;
                    }
                }
                aborter.join();
                CHECK_FALSE((co_await set.join_next()).has_value());
                // A member that nobody aborted gave its value (abort_all aside).
                if (ending == 0) {
                    int never_aborted = 0;
                    for (int i = 0; i < kMembers; ++i) never_aborted += to_abort[i] ? 0 : 1;
                    CHECK(tally.values >= never_aborted);
                }
            }());
            if (ending == 2) {
                // The dropped set's members unwind on their own; wait until every frame went.
                for (int i = 0; i < 2000 && frames.alive() != 0; ++i) std::this_thread::sleep_for(1ms);
            }
        }
        CHECK(frames.alive() == 0);
        CHECK(tally.wrong == 0);
        if (ending != 2) CHECK(tally.values + tally.aborted == kMembers);
    });
}
