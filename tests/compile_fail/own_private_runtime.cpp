// tests/compile_fail/own_private_runtime.cpp: a positive control for
// io_private_from_runtime.cpp. With the same flags, the runtime's own private headers compile.
#include "scheduler.hpp"
#include "worker.hpp"

int main() { return 0; }
