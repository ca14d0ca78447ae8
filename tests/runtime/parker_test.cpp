// tests/runtime/parker_test.cpp: white-box tests of runtime/parker.hpp.
//
// Every test here either terminates or hangs: a lost wake-up shows as a hang that meson's
// timeout turns into a failure. The data handed from the unparking thread to the parked one
// is a plain (non-atomic) variable on purpose: ThreadSanitizer then checks that unpark()
// happens-before the return of the park() it wakes, which is the Parker's whole contract.
// Parkers are declared before the threads that use them and outlive their joins: unpark()
// may still be inside notify_one after the parked thread has returned.
#include "parker.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <thread>

using eddy::detail::Parker;

TEST_SUITE("runtime/parker") {

TEST_CASE("an unpark that happened before park makes park return at once") {
    Parker p;
    int unparks_done = 0;
    std::thread unparker([&] {
        p.unpark();
        unparks_done = 1;
    });
    unparker.join();  // the unpark is over before park starts
    p.park();         // would block forever if the notification were lost
    CHECK(unparks_done == 1);
}

TEST_CASE("several unparks before park coalesce into one pending notification that park consumes") {
    Parker p;
    p.unpark();
    p.unpark();
    p.unpark();
    p.park();  // consumes the single pending notification
    // If a notification were still pending, the next park would return before the thread
    // below writes `payload`: the CHECK would fail and TSan would report the race.
    int payload = 0;
    std::thread unparker([&] {
        payload = 1;
        p.unpark();
    });
    p.park();
    CHECK(payload == 1);
    unparker.join();
}

TEST_CASE("park blocks until another thread unparks, and sees what it wrote before unpark") {
    for (int round = 0; round < 200; ++round) {
        Parker p;
        int payload = 0;  // plain on purpose: the parker must order it
        std::thread unparker([&] {
            payload = round + 1;
            p.unpark();
        });
        p.park();
        CHECK(payload == round + 1);
        unparker.join();
    }
}

TEST_CASE("ten thousand ping-pong rounds between two threads never lose a wake") {
    constexpr int kRounds = 10'000;
    Parker to_b;
    Parker to_a;
    int ball = 0;             // plain on purpose: each hand-off is ordered by one unpark/park pair
    int mismatches_on_b = 0;  // written by b only, read after the join
    std::thread b([&] {
        for (int r = 0; r < kRounds; ++r) {
            to_b.park();
            if (ball != 2 * r + 1) ++mismatches_on_b;
            ball = 2 * r + 2;
            to_a.unpark();
        }
    });
    int mismatches_on_a = 0;
    for (int r = 0; r < kRounds; ++r) {
        ball = 2 * r + 1;
        to_b.unpark();
        to_a.park();
        if (ball != 2 * r + 2) ++mismatches_on_a;
    }
    b.join();
    CHECK(mismatches_on_a == 0);
    CHECK(mismatches_on_b == 0);
    CHECK(ball == 2 * kRounds);
}

TEST_CASE("a free-running unparker never leaves the parked thread asleep after its last unpark") {
    // The unparker does not wait for the parker between unparks, so unpark() lands before,
    // during and after park() in every mix. The parked thread stops once it has seen the
    // final count; it can only get stuck if the last unpark was lost.
    constexpr std::uint32_t kUnparks = 20'000;
    Parker p;
    std::atomic<std::uint32_t> produced{0};
    std::thread unparker([&] {
        for (std::uint32_t i = 1; i <= kUnparks; ++i) {
            // Relaxed: the Parker's release/acquire is what must publish the count.
            produced.store(i, std::memory_order_relaxed);
            p.unpark();
            if (i % 64 == 0) std::this_thread::yield();  // vary the interleaving a little
        }
    });
    // At least one park, even when the unparker has finished before this thread looks (a slow
    // sanitizer build): a park after unparks it has not consumed must return at once.
    std::uint32_t parks = 0;
    do {
        p.park();
        ++parks;
    } while (produced.load(std::memory_order_relaxed) != kUnparks);
    unparker.join();
    CHECK(produced.load() == kUnparks);
    CHECK(parks <= kUnparks);  // every park returned by consuming at least one notification
}

}  // TEST_SUITE("runtime/parker")
