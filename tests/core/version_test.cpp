#include <rungs/version.hpp>

#include <catch2/catch.hpp>
#include <string>

TEST_CASE("the header version matches project(VERSION) in CMakeLists.txt") {
  std::string v = std::to_string(rungs::version_major) + "." + std::to_string(rungs::version_minor) + "." +
                  std::to_string(rungs::version_patch);
  CHECK(v == RUNGS_PROJECT_VERSION);
  CHECK(std::string(rungs::version_string) == RUNGS_PROJECT_VERSION);
}
