// benchmarks/file_read.cpp: T tasks each read a disjoint range of a file (created and synced
// before the clock starts, so the reads hit the page cache) in chunks through fs::File and
// checksum it (shared/bench/SPEC.md; the checksum is the one of the Tokio anchor, so the
// three runtimes verify the same thing).
#include "bench_main.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <bit>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <new>
#include <span>
#include <vector>

namespace {

std::uint64_t next_rand(std::uint64_t& state) {  // splitmix64
    state += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Per chunk: the sum of its little-endian u64 words (a partial last word zero-padded), folded
// as acc = (rotl(acc, 5) ^ sum) * 0x9E3779B97F4A7C15.
std::uint64_t fold_chunk(std::uint64_t acc, const std::byte* p, std::size_t n) {
    std::uint64_t sum = 0;
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        std::uint64_t w;
        std::memcpy(&w, p + i, 8);
        sum += w;
    }
    if (i < n) {
        std::uint64_t w = 0;
        std::memcpy(&w, p + i, n - i);
        sum += w;
    }
    return (std::rotl(acc, 5) ^ sum) * 0x9E3779B97F4A7C15ull;
}

std::vector<std::uint64_t> create_file(const std::string& path, std::size_t size, std::size_t range,
                                       std::size_t chunk) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) bench::fail("file_read", "create " + path + ": " + std::strerror(errno));
    std::uint64_t state = 0x123456789ABCDEF0ull;
    std::vector<std::uint64_t> expected;
    std::vector<std::byte> buf(range);
    for (std::size_t written = 0; written < size;) {
        const std::size_t len = std::min(range, size - written);
        for (std::size_t i = 0; i < len; i += 8) {
            const std::uint64_t r = next_rand(state);
            std::memcpy(buf.data() + i, &r, std::min<std::size_t>(8, len - i));
        }
        for (std::size_t i = 0; i < len; ++i)
            if (buf[i] == std::byte{0}) buf[i] = std::byte{0xA5};  // bytes are never zero
        std::uint64_t acc = 0;
        for (std::size_t off = 0; off < len; off += chunk)
            acc = fold_chunk(acc, buf.data() + off, std::min(chunk, len - off));
        expected.push_back(acc);
        for (std::size_t off = 0; off < len;) {
            const ssize_t n = ::write(fd, buf.data() + off, len - off);
            if (n < 0) bench::fail("file_read", "write " + path + ": " + std::strerror(errno));
            off += static_cast<std::size_t>(n);
        }
        written += len;
    }
    if (::fsync(fd) != 0) bench::fail("file_read", "fsync " + path + ": " + std::strerror(errno));
    ::close(fd);
    return expected;
}

struct RangeResult {
    std::uint64_t sum = 0;
    std::size_t bytes = 0;
};

eddy::Task<RangeResult> read_range(std::string path, std::uint64_t offset, std::size_t len, std::size_t chunk) {
    auto file = co_await eddy::fs::File::open(std::move(path));
    // Page-aligned, like the file's pages: the kernel's copy speed depends on where the
    // buffer sits relative to them (measured: +/-20% between heap placements), and a heap
    // placement moves with every change to the library's allocations.
    const std::unique_ptr<std::byte, decltype(&std::free)> storage(
        static_cast<std::byte*>(std::aligned_alloc(4096, (chunk + 4095) / 4096 * 4096)), &std::free);
    if (!storage) throw std::bad_alloc();
    const std::span<std::byte> buf(storage.get(), chunk);
    RangeResult r;
    while (r.bytes < len) {
        const std::size_t want = std::min(chunk, len - r.bytes);
        std::size_t got = 0;
        while (got < want) {  // read_exact
            const std::size_t n = co_await file.read_at(buf.subspan(got, want - got), offset + r.bytes + got);
            if (n == 0) throw std::runtime_error("unexpected end of file");
            got += n;
        }
        if (std::memchr(buf.data(), 0, want) != nullptr) throw std::runtime_error("zero byte read");
        r.sum = fold_chunk(r.sum, buf.data(), want);
        r.bytes += want;
    }
    co_return r;
}

eddy::Task<std::pair<double, std::vector<RangeResult>>> driver(std::string path, std::size_t tasks, std::size_t range,
                                                               std::size_t chunk) {
    const auto start = bench::Clock::now();
    std::vector<eddy::Task<RangeResult>> readers;
    for (std::size_t t = 0; t < tasks; ++t) readers.push_back(read_range(path, t * range, range, chunk));
    auto results = co_await eddy::when_all(std::move(readers));
    co_return std::pair{bench::seconds_since(start), std::move(results)};
}

}  // namespace

int main(int argc, char** argv) {
    bench::Args args(argc, argv, "file_read", {{"file-mib", 256}, {"tasks", 8}, {"chunk-kib", 64}});
    const std::size_t size = args.get("file-mib") << 20;
    const std::size_t tasks = args.get("tasks");
    const std::size_t chunk = args.get("chunk-kib") << 10;
    if (tasks == 0 || chunk == 0 || size == 0 || size % tasks != 0)
        bench::fail("file_read", "bad sizes: the file must split evenly into --tasks ranges");
    const std::size_t range = size / tasks;
    const std::string path =
        (std::filesystem::temp_directory_path() / ("eddy-bench-file_read-" + std::to_string(::getpid()) + ".bin"))
            .string();
    const auto expected = create_file(path, size, range, chunk);

    eddy::Runtime rt(args.config());
    std::pair<double, std::vector<RangeResult>> out;
    try {
        out = rt.block_on(driver(path, tasks, range, chunk));
    } catch (const std::exception& e) {
        ::unlink(path.c_str());
        bench::fail("file_read", e.what());
    }
    ::unlink(path.c_str());
    std::size_t total = 0;
    for (std::size_t t = 0; t < tasks; ++t) {
        if (out.second[t].sum != expected[t] || out.second[t].bytes != range)
            bench::fail("file_read", "range " + std::to_string(t) + ": wrong checksum or length");
        total += out.second[t].bytes;
    }
    if (total != size) bench::fail("file_read", "read " + std::to_string(total) + " bytes");
    bench::report("file_read", rt.workers(), total, out.first);
}
