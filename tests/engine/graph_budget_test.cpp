#include <rungs/engine/graph_budget.hpp>
#include <rungs/engine/model.hpp>

#include <catch2/catch.hpp>
#include <limits>

using namespace rungs::engine;

namespace {
constexpr std::int64_t MiB = 1 << 20;
constexpr std::int64_t GiB = std::int64_t{1} << 30;
bucket prompt(std::int64_t bs, std::int64_t seq) {
  return {.dims = {bs, seq, 0}, .rank = 2, .ph = phase::prompt, .shape = {bs, bs * seq, seq}};
}
bucket decode(std::int64_t bs, std::int64_t seq) {
  return {.dims = {bs, seq, 0}, .rank = 2, .ph = phase::decode, .shape = {bs, bs, seq}};
}
}  // namespace

TEST_CASE("graph_budget::gaudi is the complement of rungs::kv's Gaudi KV memory (the document's log)") {
  // 79.16 GiB free x gpu_memory_utilization 0.5 = 39.58 GiB usable; VLLM_GRAPH_RESERVED_MEM
  // 0.4 of it (15.83 GiB) for graphs, 23.75 GiB for the KV cache: 1519 blocks of 128 tokens at
  // 128 KiB per token (16 MiB per block).
  const rungs::kv::gaudi_memory m{.free_bytes = static_cast<std::int64_t>(79.16 * GiB), .gpu_memory_utilization = 0.5,
                                  .graph_reserved_mem = 0.4};
  const graph_budget g = graph_budget::gaudi(m, 0.3);
  const std::int64_t kv = rungs::kv::kv_memory(m);
  CHECK(g.bytes + kv == static_cast<std::int64_t>(79.16 * GiB * 0.5));
  CHECK(static_cast<double>(g.bytes) / GiB == Approx(15.83).epsilon(0.001));
  model_shape model{.dtype = rungs::dtype::bf16, .num_qo_heads = 32, .num_kv_heads = 8, .head_dim = 128, .block_size = 128, .num_layers = 32};
  CHECK(rungs::kv::bytes_per_block(model.kv(), model.block_size) == 16 * MiB);
  CHECK(rungs::kv::blocks_for_memory(kv, rungs::kv::bytes_per_block(model.kv(), model.block_size)) == 1519);
  CHECK(g.share(phase::prompt) + g.share(phase::decode) == g.bytes);
  CHECK(static_cast<double>(g.share(phase::prompt)) / GiB == Approx(15.83 * 0.3).epsilon(0.001));
}

TEST_CASE("estimates: measured cost per unit, or a cost model calibrated by measurements, else 0") {
  graph_ledger none(graph_budget{.bytes = 100 * MiB});
  CHECK(none.estimate(prompt(1, 128)) == 0);
  none.measured(prompt(1, 128), 128 * 3000);
  CHECK(none.estimate(prompt(4, 256)) == 1024 * 3000);  // Gaudi: 3000 bytes per token measured
  CHECK(none.estimate(decode(2, 128)) == 0);            // decode not measured yet
  CHECK(none.used() == 0);                              // measuring is not charging

  graph_ledger modelled(graph_budget{.bytes = 100 * MiB, .model = graph_cost{.base = MiB, .per_unit = 1024}});
  CHECK(modelled.estimate(prompt(2, 128)) == MiB + 256 * 1024);
  CHECK(modelled.estimate(decode(4, 2048)) == MiB + 4 * 1024);  // decode graphs scale with bs
  // A capture measured at twice the model's figure doubles later estimates of its phase.
  modelled.measured(prompt(1, 128), 2 * (MiB + 128 * 1024));
  CHECK(modelled.estimate(prompt(4, 256)) == 2 * (MiB + 1024 * 1024));
  CHECK(modelled.estimate(decode(2, 128)) == MiB + 2 * 1024);
  modelled.charge(decode(1, 128), -5 * MiB);  // freed memory is reported, charged as 0
  CHECK(modelled.used(phase::decode) == 0);
}

TEST_CASE("admission: own share first, pooled leftover once the other phase is complete") {
  graph_ledger l(graph_budget{.bytes = 1000, .prompt_ratio = 0.3});
  CHECK(l.budget().share(phase::prompt) == 300);
  CHECK(l.budget().share(phase::decode) == 700);
  l.charge(prompt(1, 1), 250);
  CHECK(l.admits(prompt(1, 1), 50, false));
  CHECK_FALSE(l.admits(prompt(1, 1), 51, false));
  CHECK(l.admits(prompt(1, 1), 51, true));   // spill-over into decode's unused share
  CHECK(l.admits(prompt(1, 1), 750, true));
  CHECK_FALSE(l.admits(prompt(1, 1), 751, true));  // never beyond the whole budget
  l.charge(decode(1, 1), 700);
  CHECK_FALSE(l.admits(decode(1, 1), 1, false));
  CHECK(l.admits(decode(1, 1), 50, true));  // spill-over the other way
  CHECK(l.left() == 50);
  CHECK(graph_ledger().admits(prompt(64, 4096), GiB * 1024, false));  // unlimited
}

TEST_CASE("bad budgets are rejected naming the value and the rule") {
  CHECK_THROWS_WITH(graph_ledger(graph_budget{.bytes = -5}),
                    "graph budget: bytes = -5 must be non-negative (or graph_budget::unlimited)");
  CHECK_THROWS_WITH(graph_ledger(graph_budget{.bytes = 5, .prompt_ratio = 1.5}),
                    "graph budget: prompt_ratio = 1.500000 must lie in [0, 1]");
  CHECK_THROWS_AS(graph_budget::gaudi({.free_bytes = 10, .graph_reserved_mem = -0.1}), std::invalid_argument);
}

TEST_CASE("cost arithmetic never wraps: overflowing costs are errors, sums past int64 are refused") {
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  const graph_cost huge{.base = 0, .per_unit = std::int64_t{1} << 62};
  CHECK(huge.bytes(decode(1, 1)) == std::int64_t{1} << 62);
  CHECK_THROWS_WITH(huge.bytes(decode(2, 1)),
                    "graph cost: base 0 + per_unit 4611686018427387904 x 2 cost units of bucket (2, 1) exceeds "
                    "2^63 - 1 bytes");
  const graph_cost at_max{.base = max, .per_unit = 1};
  CHECK_THROWS_AS(at_max.bytes(prompt(1, 1)), std::invalid_argument);
  // What `timeline --budget 1 --graph-cost 0:4611686018427387904` ran into: the estimate for
  // a 2-unit graph is an error, not -2^63 bytes admitted under a 1-byte budget.
  graph_ledger l(graph_budget{.bytes = 1, .model = huge});
  CHECK(l.estimate(decode(1, 1)) == std::int64_t{1} << 62);
  CHECK_FALSE(l.admits(decode(1, 1), l.estimate(decode(1, 1)), true));
  CHECK_THROWS_AS(l.estimate(decode(2, 1)), std::invalid_argument);

  // Admission sums past int64 exceed every budget.
  graph_ledger full(graph_budget{.bytes = max, .prompt_ratio = 1.0});
  full.charge(prompt(1, 1), 1);
  CHECK(full.admits(prompt(1, 1), max - 1, false));
  CHECK_FALSE(full.admits(prompt(1, 1), max, false));
  CHECK_FALSE(full.admits(prompt(1, 1), max, true));

  // Estimates from measurements saturate at INT64_MAX instead of converting an out-of-range
  // double (undefined behaviour).
  graph_ledger measured(graph_budget{.bytes = GiB});
  measured.measured(decode(1, 1), max);
  CHECK(measured.estimate(decode(4, 1)) == max);
  CHECK_FALSE(measured.admits(decode(4, 1), measured.estimate(decode(4, 1)), true));

  // An unlimited budget whose kept graphs pass int64 is an error, never a negative total.
  graph_ledger unlimited;
  unlimited.charge(decode(1, 1), max);
  CHECK_THROWS_WITH(unlimited.charge(prompt(1, 1), 1),
                    "graph memory: 9223372036854775807 bytes of kept graphs + 1 exceeds 2^63 - 1 bytes");
  CHECK(unlimited.used() == max);
}

TEST_CASE("non-finite budget inputs are refused") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH(graph_ledger(graph_budget{.bytes = 5, .prompt_ratio = nan}),
                    "graph budget: prompt_ratio = nan must lie in [0, 1]");
  CHECK_THROWS_AS(graph_ledger(graph_budget{.bytes = 5, .prompt_ratio = inf}), std::invalid_argument);
  CHECK_THROWS_AS(graph_budget::gaudi({.free_bytes = GiB, .gpu_memory_utilization = nan}), std::invalid_argument);
  CHECK_THROWS_AS(graph_budget::gaudi({.free_bytes = GiB, .graph_reserved_mem = inf}), std::invalid_argument);
}
