#include <rungs/ladder/capture_sizes.hpp>
#include <rungs/ladder/grid.hpp>
#include <rungs/ladder/ladder.hpp>
#include <rungs/ladder/padding.hpp>
#include <rungs/ladder/static_ladder.hpp>

#include <catch2/catch.hpp>
#include <vector>

using rungs::rung_t;

TEST_CASE("padding over a trace: padded rows, fraction wasted, eager count") {
  const rungs::ladder l{rungs::CaptureSizes::vllm(64)};
  const std::vector<rung_t> trace{33, 40, 1, 3, 100, 64};
  const rungs::padding_tally t = rungs::tally_padding(l, trace);
  CHECK(t.batches == 6);
  CHECK(t.eager == 1);
  CHECK(t.on_rungs() == 5);
  CHECK(t.real == 33 + 40 + 1 + 3 + 64);
  CHECK(t.padding == 7 + 0 + 0 + 1 + 0);
  CHECK(t.eager_real == 100);
  CHECK(t.wasted_fraction() == Approx(8.0 / 149.0));
}

TEST_CASE("a single batch of 33 on vLLM's ladder wastes 17.5%") {
  rungs::padding_tally t;
  t.add(rungs::static_ladder<rungs::CaptureSizes::vllm(512)>::lookup(33));
  CHECK(t.padding == 7);
  CHECK(t.wasted_fraction() == Approx(0.175));
}

TEST_CASE("an empty trace wastes nothing") {
  const rungs::padding_tally t;
  CHECK(t.wasted_fraction() == 0.0);
  CHECK(t.on_rungs() == 0);
}

TEST_CASE("grid lookups are tallied in tokens") {
  const rungs::bucket_grid<2> g({{1, 128}, {2, 128}, {4, 256}});
  rungs::padding_tally t;
  t.add(g.lookup({3, 100}));  // runs as (4, 256): 1024 tokens for 300 real
  t.add(g.lookup({8, 8}));    // eager
  CHECK(t.real == 300);
  CHECK(t.padding == 724);
  CHECK(t.eager == 1);
  CHECK(t.eager_real == 64);
}
