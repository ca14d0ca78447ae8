// tests/docs/doc_prelude.hpp: what every C++ block of the documentation sees.
//
// tools/doc_blocks.py turns the blocks of one markdown file into one program that includes
// this header first (docs/README.md, "Writing docs", is the author's side of it):
//   - <eddy/eddy.hpp>, the standard headers the docs use, and std::chrono_literals, so a
//     block needs no includes of its own (it may still show one: it is moved to the top);
//   - EDDY_DOC_STANDINS, the parameters of the coroutine a ```cpp fragment block is compiled
//     into: the names the docs use for "a stream you already have", never declared in text;
//   - eddy_doc::helpers, functions a block may call as if the reader had written them;
//   - the runner that calls each `int main` block in turn and names the failing block.
#pragma once

#include <eddy/eddy.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

using namespace std::chrono_literals;

// The stand-ins of a fragment: a connected stream, a bound listener, an address, a buffer,
// a line of text and the runtime. A fragment may declare the same names again (it runs in a
// block nested in the function, so its own declaration shadows the stand-in).
#define EDDY_DOC_STANDINS                                                                             \
    [[maybe_unused]] eddy::net::TcpStream &stream, [[maybe_unused]] eddy::net::TcpListener &listener, \
        [[maybe_unused]] eddy::net::SocketAddr addr, [[maybe_unused]] std::span<std::byte> buf,       \
        [[maybe_unused]] std::string line, [[maybe_unused]] eddy::Runtime &rt

namespace eddy_doc {

namespace helpers {
// "Your own request handler": upper-cases a line and gives it back with its newline.
inline std::string handle(std::string_view request) {
    std::string out(request);
    for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    out += '\n';
    return out;
}
}  // namespace helpers

template <class F>
int call_main(F& f, int argc, char** argv) {
    if constexpr (std::is_invocable_v<F&, int, char**>) {
        return f(argc, argv);
    } else {
        (void)argc;
        (void)argv;
        return f();
    }
}

struct Program {
    int line;  // the line of the block's opening fence
    int (*entry)(int, char**);
    bool norun;
};

// Runs every program block in order; exit status 0 if all passed (or were skipped), 1 if
// one failed, naming it as FILE:LINE, and 77 if every program skipped (no io_uring).
template <std::size_t N>
int run_all(const char* file, int blocks, const Program (&programs)[N], int argc, char** argv) {
    int ran = 0, skipped = 0, failed = 0;
    for (const Program& p : programs) {
        if (p.entry == nullptr || p.norun) continue;
        int status = 0;
        std::string why;
        try {
            status = p.entry(argc, argv);
        } catch (const std::exception& e) {
            if (std::string_view(e.what()).find("io_uring is unavailable") != std::string_view::npos) {
                status = 77;
            } else {
                status = 1;
                why = std::string(": threw ") + e.what();
            }
        } catch (...) {
            status = 1;
            why = ": threw a non-standard exception";
        }
        std::fflush(stdout);
        if (status == 77) {
            ++skipped;
            std::printf("%s:%d: SKIP (io_uring unavailable)\n", file, p.line);
        } else if (status != 0) {
            ++failed;
            std::printf("%s:%d: FAILED: the block's main returned %d%s\n", file, p.line, status, why.c_str());
        } else {
            ++ran;
        }
    }
    std::printf("%s: %d C++ blocks compiled, %d programs passed, %d skipped, %d failed\n", file, blocks, ran, skipped,
                failed);
    if (failed != 0) return 1;
    return ran == 0 && skipped != 0 ? 77 : 0;
}

}  // namespace eddy_doc
