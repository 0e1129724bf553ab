#include <rungs/ladder/rung.hpp>

#include <catch2/catch.hpp>
#include <stdexcept>
#include <string>

namespace {
template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const rungs::ladder_error& e) {
    return e.what();
  }
  return "(no ladder_error)";
}
}  // namespace

TEST_CASE("ladder errors name the ladder, the parameter, its value and the rule") {
  using namespace rungs::detail;
  CHECK(message_of([] { reject("linear ladder", "step", 0, "must be positive"); }) ==
        "linear ladder: step = 0 must be positive");
  CHECK(message_of([] { reject("pow2 ladder", "min", 9, "must not exceed", "max", 4); }) ==
        "pow2 ladder: min = 9 must not exceed max = 4");
  CHECK(message_of([] { reject_element("explicit ladder", "values", 2, -3, "must be positive"); }) ==
        "explicit ladder: values[2] = -3 must be positive");
  CHECK(message_of([] { reject_not_increasing("explicit ladder", "values", 3, 8, 8); }) ==
        "explicit ladder: values[3] = 8 must be greater than values[2] = 8 (rungs are strictly increasing)");
  CHECK(message_of([] { require_positive("x", "max", -1); }) == "x: max = -1 must be positive");
  CHECK(message_of([] { require_positive("x", "max", rungs::max_rung + 1); }) ==
        "x: max = 2147483648 exceeds the largest supported rung 2147483647");
  CHECK(message_of([] { require_rung_count("x", rungs::max_rungs + 1); }) ==
        "x: rung count = 65537 exceeds the limit of 65536 rungs");
  CHECK_NOTHROW(require_positive("x", "max", rungs::max_rung));
  CHECK_NOTHROW(require_rung_count("x", rungs::max_rungs));
}

TEST_CASE("ladder_error is a std::invalid_argument") {
  CHECK_THROWS_AS(rungs::detail::reject("l", "p", 1, "r"), std::invalid_argument);
}
