// Catch2 main for every paralab test executable (compiled once, linked into each).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
