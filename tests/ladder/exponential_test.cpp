#include <rungs/ladder/exponential.hpp>
#include <rungs/ladder/ladder.hpp>
#include <rungs/ladder/static_ladder.hpp>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <set>
#include <vector>

#include "rungs_of.hpp"

using rungs::Exponential;
using rungs::rung_t;
using rungs_test::rungs_list;

namespace {
rungs_list rungs_of(const Exponential& p) { return rungs_test::rungs_of(p); }

// The algorithm of gaudi-bucketing.md written the way upstream writes it (std::pow, a set,
// a scan of the whole grid for the closest unused value), as an independent check of the
// incremental implementation.
rungs_list reference(rung_t min, rung_t step, rung_t max, rung_t limit) {
  if (limit == 1) return {max};
  std::set<rung_t> chosen;
  for (rung_t i = 0; i < limit; ++i) {
    double v = static_cast<double>(min) *
               std::pow(static_cast<double>(max) / static_cast<double>(min),
                        static_cast<double>(i) / static_cast<double>(limit - 1));
    if (std::abs(v - std::round(v)) <= 1e-9 * v) v = std::round(v);
    const rung_t candidate = static_cast<rung_t>(std::ceil(v / static_cast<double>(step))) * step;
    if (!chosen.count(candidate)) {
      chosen.insert(candidate);
      continue;
    }
    bool found = false;
    rung_t best = 0;
    for (rung_t g = min; g <= max; g += step) {
      if (chosen.count(g)) continue;
      if (!found || std::abs(static_cast<double>(g) - v) < std::abs(static_cast<double>(best) - v)) best = g;
      found = true;
    }
    if (!found) break;
    chosen.insert(best);
  }
  const rung_t top = (max + step - 1) / step * step;
  if (*chosen.rbegin() < top) chosen.insert(top);
  return {chosen.begin(), chosen.end()};
}
}  // namespace

TEST_CASE("exponential worked examples from gaudi-bucketing.md") {
  // Candidates 128 256 256 384 ...: the second 256 becomes 384, and so on down the line.
  CHECK(rungs_of({128, 128, 2048, 10}) == rungs_list{128, 256, 384, 512, 640, 768, 896, 1152, 1536, 2048});
  CHECK(rungs_of({128, 128, 4096, 13}) ==
        rungs_list{128, 256, 384, 512, 640, 768, 896, 1024, 1408, 1792, 2304, 3072, 4096});
  CHECK(rungs_of({32, 32, 96, 10}) == rungs_list{32, 64, 96});  // the grid runs out
  CHECK(rungs_of({1, 2, 4, 3}) == rungs_list{1, 2, 4});         // 1 rounds up to 2; the tie 1|3 goes to 1
}

TEST_CASE("exponential ranges behind the exponential document's log") {
  // Decode blocks for a pool of 5777 KV blocks: top is 5777 rounded up to 5888.
  CHECK(rungs_of({128, 128, 5777, 14}) ==
        rungs_list{128, 256, 384, 512, 640, 768, 896, 1024, 1408, 1792, 2432, 3328, 4352, 5888});
  CHECK(rungs_of({128, 128, 1024, 11}) == rungs_list{128, 256, 384, 512, 640, 768, 896, 1024});  // prompt query
  CHECK(rungs_of({1, 1, 4, 3}) == rungs_list{1, 2, 4});   // decode bs
  CHECK(rungs_of({1, 1, 1, 1}) == rungs_list{1});         // prompt bs
}

TEST_CASE("exponential edge cases") {
  CHECK(rungs_of({1, 1, 16, 5}) == rungs_list{1, 2, 4, 8, 16});  // exact powers stay exact
  CHECK(rungs_of({100, 64, 1000, 1}) == rungs_list{1000});       // limit 1: just max
  CHECK(rungs_of({100, 64, 1000, 2}).front() == 128);            // min 100 rounds up to 128
  CHECK(rungs_of({100, 64, 1000, 2}).back() == 1024);            // max 1000 rounds up to 1024
  CHECK(rungs_of({100, 64, 100, 3}) == rungs_list{100, 128});    // min == max
  // The grid 1, 3 runs out before the last target; rungs still covers max with 4.
  CHECK(rungs_of({1, 2, 4, 10}) == rungs_list{1, 2, 3, 4});
}

TEST_CASE("exponential ladders match the reference algorithm and keep their invariants") {
  for (rung_t min : {1, 2, 3, 16, 100, 128})
    for (rung_t step : {1, 2, 8, 32, 64, 128})
      for (rung_t max : {min, min + 1, 4 * min + 3, 64 * min, rung_t{5777}})
        for (rung_t limit : {1, 2, 3, 5, 8, 13, 20}) {
          if (max < min) continue;
          INFO(min << " " << step << " " << max << " " << limit);
          const Exponential p{min, step, max, limit};
          const rungs_list r = rungs_of(p);
          CHECK(r == reference(min, step, max, limit));
          CHECK(r.size() <= static_cast<std::size_t>(limit));
          CHECK(std::adjacent_find(r.begin(), r.end(), std::greater_equal<>()) == r.end());
          CHECK(r.front() >= min);
          CHECK(r.back() == p.top());
          CHECK(r.back() >= max);
        }
}

TEST_CASE("invalid exponential parameters are rejected") {
  CHECK_THROWS_WITH(rungs_of({128, 128, 2048, 0}), "exponential ladder: limit = 0 must be positive");
  CHECK_THROWS_WITH(rungs_of({128, 0, 2048, 4}), "exponential ladder: step = 0 must be positive");
  CHECK_THROWS_WITH(rungs_of({0, 128, 2048, 4}), "exponential ladder: min = 0 must be positive");
  CHECK_THROWS_WITH(rungs_of({256, 128, 128, 4}), "exponential ladder: min = 256 must not exceed max = 128");
  CHECK_THROWS_WITH(rungs_of({1, 1, 100000, 5000}),
                    "exponential ladder: limit = 5000 exceeds the largest supported limit 4096");
  CHECK_THROWS_WITH(rungs_of({1, 128, rungs::max_rung, 4}),
                    "exponential ladder: max = 2147483647 rounded up to a multiple of step exceeds the largest "
                    "supported rung 2147483647");
}

TEST_CASE("an exponential ladder is the same at compile time") {
  using decode_blocks = rungs::static_ladder<Exponential{.min = 128, .step = 128, .max = 5777, .limit = 14}>;
  STATIC_REQUIRE(decode_blocks::size() == 14);
  STATIC_REQUIRE(decode_blocks::top() == 5888);
  STATIC_REQUIRE(decode_blocks::lookup(1025).rung == 1408);
  const rungs::ladder l{decode_blocks::policy};
  CHECK(std::equal(l.rungs().begin(), l.rungs().end(), decode_blocks::values.begin(), decode_blocks::values.end()));
}
