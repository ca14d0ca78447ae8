// tests/support/doctest_main.cpp: the one translation unit that holds doctest's runner.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
