// The one main() of the unit-test binary; every other tests/unit/*.cpp holds test cases.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
