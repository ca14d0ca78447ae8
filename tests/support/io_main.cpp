// tests/support/io_main.cpp: the doctest runner of every test that starts a Runtime.
//
// A Runtime needs io_uring. Where the kernel refuses it (too old, kernel.io_uring_disabled,
// a seccomp filter, RLIMIT_MEMLOCK), the test is skipped (exit code 77, which meson reports
// as SKIP) with eddy's own explanation, instead of failing.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string_view>
#include <system_error>

#include <eddy/runtime/runtime.hpp>

int main(int argc, char** argv) {
    try {
        eddy::Runtime probe(eddy::RuntimeConfig{.workers = 1});
    } catch (const std::system_error& e) {
        if (std::string_view(e.what()).find("io_uring is unavailable") != std::string_view::npos) {
            std::printf("SKIP: %s\n", e.what());
            return 77;
        }
        throw;
    }
    doctest::Context context(argc, argv);
    return context.run();
}
