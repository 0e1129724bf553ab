#include <rungs/ladder/ladder.hpp>
#include <rungs/ladder/linear.hpp>
#include <rungs/ladder/static_ladder.hpp>

#include <algorithm>
#include <catch2/catch.hpp>
#include <vector>

#include "rungs_of.hpp"

using rungs::Linear;
using rungs::rung_t;
using rungs_test::rungs_list;

namespace {
rungs_list rungs_of(const Linear& p) { return rungs_test::rungs_of(p); }
}  // namespace

TEST_CASE("linear ladders from the Gaudi document and reference notes") {
  CHECK(rungs_of({2, 32, 64}) == rungs_list{2, 4, 8, 16, 32, 64});      // with ramp-up
  CHECK(rungs_of({128, 128, 512}) == rungs_list{128, 256, 384, 512});   // without
  CHECK(rungs_of({1, 32, 4}) == rungs_list{1, 2, 4});                   // prompt bs of the log
  CHECK(rungs_of({1, 128, 4}) == rungs_list{1, 2, 4});                  // decode bs of the log
  rungs_list seq;
  for (rung_t s = 128; s <= 2048; s += 128) seq.push_back(s);
  CHECK(rungs_of({128, 128, 2048}) == seq);
  CHECK(seq.size() == 16);
}

TEST_CASE("linear ladders always hold min and max and nothing below min") {
  CHECK(rungs_of({3, 32, 100}) == rungs_list{3, 6, 12, 24, 32, 64, 96, 100});
  // Upstream drops 1000 (ends at 896) and a 1000-token prompt has no bucket.
  CHECK(rungs_of({100, 128, 1000}) == rungs_list{100, 128, 256, 384, 512, 640, 768, 896, 1000});
  // Upstream yields 4 8 ..., below min.
  CHECK(rungs_of({5, 4, 20}) == rungs_list{5, 8, 12, 16, 20});
  CHECK(rungs_of({7, 7, 7}) == rungs_list{7});
  CHECK(rungs_of({3, 32, 20}) == rungs_list{3, 6, 12, 20});
  CHECK(rungs_of({1, 1, 5}) == rungs_list{1, 2, 3, 4, 5});
}

TEST_CASE("linear ladder properties over many parameters") {
  for (rung_t min = 1; min <= 24; ++min)
    for (rung_t step = 1; step <= 40; step += 3)
      for (rung_t max = min; max <= 130; max += 7) {
        const Linear p{min, step, max};
        const rungs_list r = rungs_of(p);
        INFO(min << " " << step << " " << max);
        REQUIRE(r.size() == p.capacity());
        CHECK(r.front() == min);
        CHECK(r.back() == max);
        CHECK(std::adjacent_find(r.begin(), r.end(), std::greater_equal<>()) == r.end());
        // Every multiple of step above the ramp-up is a rung; the ramp-up doubles from min.
        for (rung_t m = step; m <= max; m += step)
          if (m > min) CHECK(std::count(r.begin(), r.end(), m) == 1);
        for (std::size_t i = 1; i < r.size() && r[i] < step && r[i] != max; ++i) CHECK(r[i] == 2 * r[i - 1]);
      }
}

TEST_CASE("invalid linear parameters are rejected, naming the value and the rule") {
  CHECK_THROWS_WITH(rungs_of({1, 0, 4}), "linear ladder: step = 0 must be positive");
  CHECK_THROWS_WITH(rungs_of({0, 32, 64}), "linear ladder: min = 0 must be positive");
  CHECK_THROWS_WITH(rungs_of({-2, 32, 64}), "linear ladder: min = -2 must be positive");
  CHECK_THROWS_WITH(rungs_of({2, 32, -64}), "linear ladder: max = -64 must be positive");
  CHECK_THROWS_WITH(rungs_of({128, 128, 64}), "linear ladder: min = 128 must not exceed max = 64");
  CHECK_THROWS_WITH(rungs_of({1, 1, rungs::max_rung + 1}),
                    "linear ladder: max = 2147483648 exceeds the largest supported rung 2147483647");
  CHECK_THROWS_WITH(rungs_of({1, 1, 1000000}), "linear ladder: rung count = 1000000 exceeds the limit of 65536 rungs");
  CHECK_THROWS_AS(rungs_of({1, 0, 4}), rungs::ladder_error);
}

TEST_CASE("Linear is a structural value: a template argument, printable, comparable") {
  constexpr Linear p{.min = 2, .step = 32, .max = 64};
  using L = rungs::static_ladder<p>;
  STATIC_REQUIRE(L::values == std::array<rung_t, 6>{2, 4, 8, 16, 32, 64});
  STATIC_REQUIRE(std::is_same_v<L, rungs::static_ladder<Linear{2, 32, 64}>>);
  CHECK(rungs::ladder{p}.description() == "Linear{.min = 2, .step = 32, .max = 64}");
  CHECK(p == Linear{2, 32, 64});
  CHECK(p != Linear{2, 16, 64});
}
