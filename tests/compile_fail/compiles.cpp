// tests/compile_fail/compiles.cpp: the harness's positive control. It compiles (C++20, the
// umbrella header, a coroutine), so check_compile_fail.py must call it a failure; it also
// shows that the include directories meson passes reach every header, generated ones too.
#include <eddy/eddy.hpp>

eddy::Task<int> answer() { co_return 42; }

int main() {
    eddy::Runtime rt(eddy::RuntimeConfig{.workers = 1});
    return rt.block_on(answer()) == 42 ? 0 : 1;
}
