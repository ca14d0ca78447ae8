// tests/compile_fail/runtime_private_from_io.cpp: the I/O layer cannot include a private
// header of the runtime layer. Compiled as a source of libeddy_io is (its private include
// root, the public headers, EDDY_INTERNAL), "scheduler.hpp" is not found: the reactor reaches
// the scheduler only through <eddy/runtime/detail/driver.hpp>. own_private_io.cpp, compiled
// the same way, shows that the I/O layer's own private headers are found.
#include "scheduler.hpp"

int main() { return 0; }
