// tests/support/memory_stream.hpp: a byte stream in memory for the tests of the code that
// works on any stream (eddy/io/stream.hpp): BufReader, BufWriter, the frame codecs.
//
// Reads hand out `input` at most `chunk` bytes at a time (1: every delimiter and header is
// split across reads), and every read first yields to the scheduler, so a read really
// suspends; writes take at most `write_chunk` bytes each and append to `output`. Counters
// tell how many reads and writes the code under test made.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <span>
#include <string>

#include <eddy/io/stream.hpp>
#include <eddy/runtime/yield_now.hpp>
#include <eddy/tasks/task.hpp>

namespace eddy::test {

struct MemoryStream {
    std::string input{};
    std::size_t chunk = 1;
    std::string output{};
    std::size_t write_chunk = static_cast<std::size_t>(-1);
    std::size_t pos = 0, reads = 0, writes = 0;

    Task<std::size_t> read(std::span<std::byte> buf) {
        ++reads;
        co_await eddy::yield_now();
        const std::size_t n = std::min({buf.size(), chunk, input.size() - pos});
        if (n > 0) std::memcpy(buf.data(), input.data() + pos, n);
        pos += n;
        co_return n;
    }
    Task<std::size_t> write(std::span<const std::byte> data) {
        ++writes;
        co_await eddy::yield_now();
        const std::size_t n = std::min(data.size(), write_chunk);
        output.append(reinterpret_cast<const char*>(data.data()), n);
        co_return n;
    }
};

static_assert(io::AsyncStream<MemoryStream>);

}  // namespace eddy::test
