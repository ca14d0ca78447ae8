// tests/compile_fail/io_private_from_runtime.cpp: the runtime layer cannot include a private
// header of the I/O layer above it. Compiled as a source of libeddy_runtime is, the reactor's
// header is not found (own_private_runtime.cpp shows the runtime's own are).
#include "reactor/reactor.hpp"

int main() { return 0; }
