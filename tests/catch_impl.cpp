// Catch2's implementation, compiled once by the host compiler: both mains (catch_main.cpp for
// the host tests, cuda_main.cpp for the CUDA tests) link this object and run the tests through
// rungs_catch_run, so a build with CUDA tests compiles Catch2's implementation once, not once
// per main. (Catch2 2.x declares Catch::Session only where its implementation is compiled.)
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

int rungs_catch_run(int argc, char** argv) { return Catch::Session().run(argc, argv); }
