#include <rungs/ladder/explicit.hpp>
#include <rungs/ladder/ladder.hpp>
#include <rungs/ladder/static_ladder.hpp>

#include <catch2/catch.hpp>
#include <type_traits>
#include <vector>

using rungs::Explicit;
using rungs::rung_t;
using rungs_list = std::vector<rung_t>;

TEST_CASE("explicit ladders, fixed at compile time or read at run time") {
  constexpr Explicit fixed{1, 2, 4, 8, 16};
  STATIC_REQUIRE(std::is_same_v<std::remove_const_t<decltype(fixed)>, Explicit<5>>);
  using L = rungs::static_ladder<fixed>;
  STATIC_REQUIRE(L::size() == 5);
  STATIC_REQUIRE(L::lookup(9).rung == 16);

  const Explicit dynamic{rungs_list{1, 2, 4, 8, 16}};
  STATIC_REQUIRE(std::is_same_v<std::remove_const_t<decltype(dynamic)>, Explicit<>>);
  const rungs::ladder a{fixed}, b{dynamic};
  CHECK(a == b);
  CHECK(a.description() == "Explicit{1, 2, 4, 8, 16}");
  CHECK(b.description() == "Explicit{1, 2, 4, 8, 16}");
  CHECK(rungs::ladder{Explicit{7}}.top() == 7);
}

TEST_CASE("explicit ladders must be non-empty, positive and strictly increasing") {
  CHECK_THROWS_WITH((rungs::ladder{Explicit{rungs_list{}}}), "explicit ladder: rung count = 0 must be positive");
  CHECK_THROWS_WITH((rungs::ladder{Explicit{0, 1, 2}}), "explicit ladder: values[0] = 0 must be positive");
  CHECK_THROWS_WITH((rungs::ladder{Explicit{rungs_list{1, -2}}}), "explicit ladder: values[1] = -2 must be positive");
  CHECK_THROWS_WITH((rungs::ladder{Explicit{1, 4, 4}}),
                    "explicit ladder: values[2] = 4 must be greater than values[1] = 4 (rungs are strictly increasing)");
  CHECK_THROWS_WITH((rungs::ladder{Explicit{8, 4}}),
                    "explicit ladder: values[1] = 4 must be greater than values[0] = 8 (rungs are strictly increasing)");
  CHECK_THROWS_WITH((rungs::ladder{Explicit{rungs_list{1, rungs::max_rung + 1}}}),
                    "explicit ladder: values[1] = 2147483648 exceeds the largest supported rung 2147483647");
}
