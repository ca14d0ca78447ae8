// PLACEHOLDER: to be written
#include <doctest/doctest.h>
TEST_CASE("placeholder") { CHECK(true); }
