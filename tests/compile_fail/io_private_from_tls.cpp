// tests/compile_fail/io_private_from_tls.cpp: eddy::tls, its own library above the I/O layer,
// sees the I/O layer's public headers only: the reactor's private header is not found.
#include "reactor/reactor.hpp"

int main() { return 0; }
