// Tests of include/rungs/planning/fit.hpp: the fitted ladder is the exact optimum, checked
// against brute force over every ladder on small random distributions; 2-D grids likewise
// when the exhaustive path applies, and never worse than their starts otherwise.
#include <rungs/ladder/capture_sizes.hpp>
#include <rungs/planning/fit.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

using namespace rungs;
using namespace rungs::planning;

namespace {

// Every ladder of k rungs drawn from 1..top with the top rung at `top`: the true optimum
// (not only ladders on observed values).
std::int64_t brute_force(const std::vector<value_count>& v, std::size_t k, rung_t top) {
  std::int64_t best = INT64_MAX;
  std::vector<rung_t> l(k);
  l[k - 1] = top;
  auto rec = [&](auto&& self, std::size_t i, rung_t from) -> void {
    if (i + 1 == k) {
      best = std::min(best, evaluate_ladder(l, v).padding);
      return;
    }
    for (rung_t r = from; r < top; ++r) {
      l[i] = r;
      self(self, i + 1, r + 1);
    }
  };
  if (k == 1 || static_cast<rung_t>(k) <= top) rec(rec, 0, 1);
  return best;
}

std::vector<value_count> random_values(std::mt19937& rng, rung_t max_value, std::size_t n) {
  size_histogram h;
  std::uniform_int_distribution<rung_t> value(1, max_value);
  std::uniform_int_distribution<std::int64_t> count(1, 50);
  for (std::size_t i = 0; i < n; ++i) h.add(value(rng), count(rng));
  return h.values();
}

}  // namespace

TEST_CASE("fit_ladder matches brute force over every ladder on small distributions") {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 60; ++trial) {
    const rung_t max_value = 6 + trial % 10;
    const std::vector<value_count> v = random_values(rng, max_value, 3 + trial % 8);
    for (std::size_t k = 1; k <= 5; ++k) {
      const fitted_ladder f = fit_ladder(v, k);
      INFO("trial " << trial << ", k " << k);
      CHECK(f.rungs.size() <= k);
      CHECK(f.rungs.back() == v.back().value);
      CHECK(f.cost.eager == 0);
      CHECK(f.cost == evaluate_ladder(f.rungs, v));
      const std::size_t usable = std::min<std::size_t>(k, static_cast<std::size_t>(v.back().value));
      CHECK(f.cost.padding == brute_force(v, usable, v.back().value));
    }
  }
}

TEST_CASE("fit_ladder with a forced top above the values") {
  const std::vector<value_count> v{{1, 10}, {3, 5}, {7, 1}};
  const fitted_ladder f = fit_ladder(v, 3, 16);
  CHECK(f.rungs == std::vector<rung_t>{1, 3, 16});  // 7 pads to 16 once (9 rows), not 1 to 3 ten times (20)
  CHECK(f.cost.padding == 9);
  CHECK(f.cost.padding == brute_force(v, 3, 16));
  CHECK(fit_ladder(v, 4, 16).rungs == std::vector<rung_t>{1, 3, 7, 16});
  CHECK(fit_ladder(v, 9, 16).rungs == std::vector<rung_t>{1, 3, 7, 16});  // no more points than that
}

TEST_CASE("fit_ladder: hand-checked optimum and more rungs never hurt") {
  // 1 x10, 2 x10, 3 x1, 8 x5: with two rungs the top is 8; the other at 2 pads 1 (x10) and 3 (x1: 5) = 15.
  const std::vector<value_count> v{{1, 10}, {2, 10}, {3, 1}, {8, 5}};
  const fitted_ladder two = fit_ladder(v, 2);
  CHECK(two.rungs == std::vector<rung_t>{2, 8});
  CHECK(two.cost.padding == 10 + 5);
  CHECK(two.cost.real == 10 + 20 + 3 + 40);
  std::int64_t last = INT64_MAX;
  for (std::size_t k = 1; k <= 4; ++k) {
    const std::int64_t p = fit_ladder(v, k).cost.padding;
    CHECK(p <= last);
    last = p;
  }
  CHECK(last == 0);
}

TEST_CASE("fit_ladder scales to thousands of distinct values") {
  std::mt19937 rng(7);
  const std::vector<value_count> v = random_values(rng, 8192, 20000);
  const fitted_ladder f = fit_ladder(v, 67);
  CHECK(f.rungs.size() == 67);
  CHECK(f.rungs.back() == v.back().value);
  // At vLLM's rung count for 512 (67), never worse than vLLM's ladder.
  const std::vector<value_count> small = random_values(rng, 512, 2000);
  const rungs::ladder vllm{CaptureSizes::vllm(small.back().value)};
  const fitted_ladder g = fit_ladder(small, vllm.size());
  CHECK(g.cost.padding <= evaluate_ladder(vllm.rungs(), small).padding);
}

TEST_CASE("fit_ladder rejects bad input with the rule") {
  const std::vector<value_count> v{{4, 1}, {2, 1}};
  CHECK_THROWS_WITH(fit_ladder(v, 2), "ladder fit: values must be distinct and ascending (2 after 4)");
  CHECK_THROWS_WITH(fit_ladder(std::vector<value_count>{{4, 1}}, 0), "ladder fit: rungs = 0 must be positive");
  CHECK_THROWS_WITH(fit_ladder(std::vector<value_count>{{4, 1}}, 2, 3),
                    "ladder fit: top = 3 must not be below the largest value 4");
  CHECK_THROWS_WITH(fit_ladder(std::vector<value_count>{}, 2), "ladder fit: no observed values to fit");
  size_histogram h;
  CHECK_THROWS_WITH(h.add(0), "size histogram: value = 0 must be in [1, 2147483647]");
}

TEST_CASE("fit_ladder_to_memory buys as many rungs as the budget holds at the top rung's cost") {
  const std::vector<value_count> v{{1, 10}, {2, 10}, {3, 1}, {8, 5}};
  const rung_memory m{.base = 100, .per_token = 10};  // the top graph: 180 bytes
  CHECK(fit_ladder_to_memory(v, 360, m).rungs == fit_ladder(v, 2).rungs);
  CHECK(fit_ladder_to_memory(v, 539, m).rungs == fit_ladder(v, 2).rungs);
  CHECK(fit_ladder_to_memory(v, 540, m).rungs == fit_ladder(v, 3).rungs);
  CHECK(m.total(fit_ladder_to_memory(v, 540, m).rungs) <= 540);
  CHECK_THROWS_WITH(fit_ladder_to_memory(v, 179, m),
                    "ladder fit: graph memory = 179 bytes does not hold the top rung's graph (180 bytes)");
}

TEST_CASE("the fitted ladder is a ladder like any other") {
  const fitted_ladder f = fit_ladder(std::vector<value_count>{{3, 4}, {5, 1}, {9, 2}}, 2);
  const rungs::ladder l = f.to_ladder();
  CHECK(l.size() == 2);
  CHECK(l.lookup(4).rung == 9);
  CHECK(l.lookup(3).rung == 3);
  CHECK(l.description() == "Explicit{3, 9}");
}

namespace {
std::int64_t brute_force_grid(const std::vector<grid_value>& v, std::size_t kb, std::size_t ks) {
  const std::vector<rung_t> ba = planning::detail::grid_axis(v, true), sa = planning::detail::grid_axis(v, false);
  std::int64_t best = INT64_MAX;
  planning::detail::each_ladder(ba, kb, [&](const std::vector<rung_t>& b) {
    planning::detail::each_ladder(sa, ks, [&](const std::vector<rung_t>& s) {
      best = std::min(best, evaluate_grid(b, s, v).padding);
    });
  });
  return best;
}
}  // namespace

TEST_CASE("fit_grid is exact against brute force over every product grid") {
  std::mt19937 rng(99);
  std::uniform_int_distribution<rung_t> bs(1, 12), seq(1, 40);
  std::uniform_int_distribution<std::int64_t> count(1, 9);
  for (int trial = 0; trial < 25; ++trial) {
    std::vector<grid_value> v;
    for (int i = 0; i < 12; ++i) v.push_back({bs(rng), seq(rng), count(rng)});
    for (std::size_t budget : {1u, 2u, 4u, 6u, 9u}) {
      const fitted_grid g = fit_grid(v, budget);
      INFO("trial " << trial << ", budget " << budget);
      CHECK(g.exact);
      CHECK(g.buckets() <= budget);
      CHECK(g.cost.eager == 0);
      std::int64_t best = INT64_MAX;
      const std::size_t nb = planning::detail::grid_axis(v, true).size(), ns = planning::detail::grid_axis(v, false).size();
      for (std::size_t kb = 1; kb <= std::min(budget, nb); ++kb)
        best = std::min(best, brute_force_grid(v, kb, std::min(budget / kb, ns)));
      CHECK(g.cost.padding == best);
    }
  }
}

TEST_CASE("fit_grid alternation: never worse than fitting one axis at a time") {
  std::mt19937 rng(5);
  std::uniform_int_distribution<rung_t> bs(1, 64), seq(1, 2048);
  std::vector<grid_value> v;
  for (int i = 0; i < 400; ++i) v.push_back({bs(rng), seq(rng), 1});
  const fitted_grid g = fit_grid(v, 48, {.exhaustive_limit = 0});
  CHECK_FALSE(g.exact);
  CHECK(g.buckets() <= 48);
  CHECK(g.cost.eager == 0);
  // Its first start, by hand: bs fitted against the top seq rung alone, then seq against that.
  const std::vector<rung_t> ba = planning::detail::grid_axis(v, true), sa = planning::detail::grid_axis(v, false);
  const fitted_grid shape = planning::detail::fit_grid_shape(v, ba, sa, 6, 8, {.exhaustive_limit = 0});
  const std::vector<rung_t> b0 = planning::detail::fit_axis(v, std::vector<rung_t>{sa.back()}, true, ba, 6);
  const std::vector<rung_t> s0 = planning::detail::fit_axis(v, b0, false, sa, 8);
  CHECK(shape.cost.padding <= evaluate_grid(b0, s0, v).padding);
  CHECK(g.cost.padding <= shape.cost.padding);
  const std::vector<rung_t> b6{8, 16, 24, 32, 48, 64};
  const std::vector<rung_t> s8{256, 512, 768, 1024, 1280, 1536, 1792, 2048};
  CHECK(shape.cost.padding < evaluate_grid(b6, s8, v).padding);  // a Gaudi-like linear 6 x 8 grid
}
