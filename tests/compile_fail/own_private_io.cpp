// tests/compile_fail/own_private_io.cpp: a positive control for runtime_private_from_io.cpp.
// With the same flags, the I/O layer's own private headers (and through them the runtime's
// driver seam) compile: that case fails for the layer boundary, not for a missing directory.
#include "reactor/reactor.hpp"
#include "time/timer_queue.hpp"

int main() { return 0; }
