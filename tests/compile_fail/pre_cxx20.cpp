// tests/compile_fail/pre_cxx20.cpp: <eddy/eddy.hpp> compiled with -std=c++17 must stop at one
// #error that names the fix, not at pages of errors from the headers behind it.
#include <eddy/eddy.hpp>

int main() { return 0; }
