#include <rungs/ladder/ladder.hpp>
#include <rungs/ladder/pow2.hpp>
#include <rungs/ladder/static_ladder.hpp>

#include <catch2/catch.hpp>
#include <vector>

#include "rungs_of.hpp"

using rungs::Pow2;
using rungs::rung_t;
using rungs_test::rungs_list;

namespace {
rungs_list rungs_of(const Pow2& p) { return rungs_test::rungs_of(p); }
}  // namespace

TEST_CASE("powers of two, with min and max always rungs") {
  CHECK(rungs_of({1, 64}) == rungs_list{1, 2, 4, 8, 16, 32, 64});
  CHECK(rungs_of({3, 100}) == rungs_list{3, 4, 8, 16, 32, 64, 100});
  CHECK(rungs_of({8, 8}) == rungs_list{8});
  CHECK(rungs_of({5, 6}) == rungs_list{5, 6});
  CHECK(rungs_of({1, rung_t{1} << 21}).size() == 22);
  CHECK(rungs_of({1, rung_t{1} << 21}).back() == rung_t{1} << 21);
  STATIC_REQUIRE(rungs::static_ladder<Pow2{.min = 1, .max = 512}>::size() == 10);
}

TEST_CASE("invalid pow2 parameters") {
  CHECK_THROWS_WITH(rungs_of({0, 64}), "pow2 ladder: min = 0 must be positive");
  CHECK_THROWS_WITH(rungs_of({64, 8}), "pow2 ladder: min = 64 must not exceed max = 8");
  // Valid, but 1 and 2^31 - 1 share no factor of two: the lookup table would need 2^31 entries.
  CHECK_THROWS_WITH(rungs_of({1, rungs::max_rung}),
                    "ladder: top rung = 2147483647 needs a lookup table of more than 4194304 entries; use rungs that "
                    "share a larger power-of-two factor");
}
