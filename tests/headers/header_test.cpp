// tests/headers/header_test.cpp: compiles one public header alone (EDDY_TEST_HEADER), without
// EDDY_INTERNAL, so every public header is self-contained and includes no private one.
#include EDDY_TEST_HEADER

int main() { return 0; }
