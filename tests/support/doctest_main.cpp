// tests/support/doctest_main.cpp: the runner of every doctest program in tests/.
#define DOCTEST_CONFIG_IMPLEMENT
#include "doctest_run.hpp"

int main(int argc, char** argv) { return eddy_test::run_doctest(argc, argv); }
