// The one Catch2 main of rungs' tests, compiled by the host compiler only.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
