// examples/fizzbuzz.cpp: Fizz Buzz from 1 to 20, one line every 100 ms (about 2 s in all).
//
// Shows tasks that talk through pipes and a timer. Two writer tasks put their words into
// pipes: "Fizz" for each multiple of 3, "Buzz" for each multiple of 5, in order, then close
// their end. A printer task wakes on a 100 ms tick; on tick i it takes the next word from the
// fizz pipe when 3 divides i and from the buzz pipe when 5 divides i, and prints what it got
// (or i itself). The three run in parallel under when_all. Expected output: 1, 2, Fizz, 4,
// Buzz, Fizz, 7, 8, Fizz, Buzz, 11, Fizz, 13, 14, FizzBuzz, 16, 17, Fizz, 19, Buzz.
#include <eddy/eddy.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace {

constexpr int kLines = 20;
constexpr std::size_t kWordSize = 4;  // "Fizz" and "Buzz": every packet has this size

/// Writes `word` into the pipe once for every multiple of `divisor` up to kLines, then
/// closes the pipe, which the reader sees as end of file.
eddy::Task<void> announce(eddy::io::FileDescriptor out, int divisor, std::string_view word) {
    for (int i = divisor; i <= kLines; i += divisor) {
        // A pipe write of at most PIPE_BUF bytes is atomic, so each word arrives whole.
        co_await eddy::io::write(out.get(), std::as_bytes(std::span(word)));
    }
    // Close explicitly: a parameter lives as long as the coroutine frame, and when_all keeps
    // the frames of finished children until the last child is done, which is too late here.
    out.close();
}

/// The next word from a pipe ("" at end of file).
eddy::Task<std::string> next_word(int fd) {
    std::array<std::byte, kWordSize> buf;
    std::size_t got = 0;
    while (got < buf.size()) {
        const std::size_t n = co_await eddy::io::read(fd, std::span(buf).subspan(got));
        if (n == 0) break;  // the writer closed its end
        got += n;
    }
    co_return std::string(reinterpret_cast<const char*>(buf.data()), got);
}

/// One line per 100 ms tick; the words come from the pipes.
eddy::Task<void> print_lines(eddy::io::FileDescriptor fizz, eddy::io::FileDescriptor buzz) {
    using namespace std::chrono_literals;
    auto tick = std::chrono::steady_clock::now();
    for (int i = 1; i <= kLines; ++i) {
        tick += 100ms;
        co_await eddy::sleep_until(tick);  // a deadline, not a duration: ticks do not drift
        std::string line;
        if (i % 3 == 0) line += co_await next_word(fizz.get());
        if (i % 5 == 0) line += co_await next_word(buzz.get());
        if (line.empty()) line = std::to_string(i);
        std::printf("%s\n", line.c_str());
    }
    // Every word was used exactly once: both writers are done and their pipes are empty.
    if (!(co_await next_word(fizz.get())).empty() || !(co_await next_word(buzz.get())).empty())
        throw std::logic_error("fizzbuzz: a pipe still holds words");
}

eddy::Task<void> main_task() {
    auto [fizz_in, fizz_out] = eddy::io::pipe();
    auto [buzz_in, buzz_out] = eddy::io::pipe();
    co_await eddy::when_all(announce(std::move(fizz_out), 3, "Fizz"), announce(std::move(buzz_out), 5, "Buzz"),
                            print_lines(std::move(fizz_in), std::move(buzz_in)));
}

}  // namespace

int main() {
    // One worker per available CPU; from_env() lets the EDDY_* variables override that
    // (EDDY_WORKERS=1 for one worker). A plain `eddy::Runtime rt;` would read none of them.
    eddy::Runtime rt(eddy::RuntimeConfig::from_env());
    rt.block_on(main_task());
}
