// Tests of simulate with a cache in tiers (simulation_config::tiers, planning/simulate.hpp):
// hits per tier and load seconds by hand, and the tiered study's hits at low load.
#include <rungs/planning/cache_tiers.hpp>
#include <rungs/planning/data_parallel.hpp>
#include <rungs/planning/fleet.hpp>
#include <rungs/planning/simulate.hpp>

#include <catch2/catch.hpp>

#include "tiny_config.hpp"

using namespace rungs;
using namespace rungs::planning;

namespace {

// tiny() (steps of max(10 ms, 2 ms a token row), +5 ms eager above the top rung of 16) with
// prefix caching over a pool of `blocks` blocks of 16 tokens at 32 KV bytes a token (one layer,
// one KV head of 8 fp16 elements).
simulation_config tiered(std::int32_t blocks, std::vector<cache_tier> tiers) {
  simulation_config c = test::tiny();
  c.model = {.layers = 1, .kv_heads = 1, .head_dim = 8, .bytes_per_element = 2};
  c.kv_bytes = std::int64_t{blocks} * 16 * 32;
  c.watermark = 0;
  c.max_model_len = 64;
  c.prefix_caching = true;
  c.tiers = std::move(tiers);
  return c;
}

// A standalone request of 33 tokens, all from hash id `id` (one 512-token id block), one output.
serving::trace_request request(double arrival, std::uint64_t id) {
  return {.arrival = arrival, .prompt_tokens = 33, .output_tokens = 1, .hash_ids = {id}};
}

}  // namespace

TEST_CASE("simulate --tiers: a block evicted to dram is found there, loaded, and its load is in the TTFT") {
  // A, B, A one at a time on a pool of 4 blocks (as tier_store's allocator test): A caches
  // a0 a1; B evicts a1 (A's tail, released first) into dram; A again hits a0 in the pool and
  // a1 in dram. Each request looks up 2 blocks (33 tokens less the last).
  const std::vector<serving::trace_request> trace = {request(0, 1), request(1, 2), request(2, 1)};
  // dram loads 16 tokens x 32 bytes = 512 bytes at 51,200 bytes/s: 10 ms.
  const simulation_result r =
      simulate(tiered(4, {{.name = "hbm"}, {.name = "dram", .capacity_tokens = 64, .bandwidth = 51'200}}), trace);
  REQUIRE(r.tiers.size() == 2);
  CHECK(r.tier_looked_up_blocks == 6);
  CHECK(r.tiers[0].tier.capacity_tokens == 64);  // the pool's 4 blocks
  CHECK(r.tiers[0].hit_blocks == 1);
  CHECK(r.tiers[0].hit_tokens == 16);
  CHECK(r.tiers[0].load_seconds == 0);
  CHECK(r.tiers[1].hit_blocks == 1);
  CHECK(r.tiers[1].hit_tokens == 16);
  CHECK(r.tiers[1].hit_rate == Approx(1.0 / 6));
  CHECK(r.tiers[1].load_seconds == Approx(0.010));
  CHECK(r.scheduler.prefix_hit_tokens == 32);
  // A and B prefill 33 tokens eagerly (above the top rung): 66 ms + 5 ms. A's second turn
  // computes 1 token (bucket 4: 10 ms) after its 10 ms load.
  CHECK(r.requests[0].ttft() == Approx(0.071));
  CHECK(r.requests[1].ttft() == Approx(0.071));
  CHECK(r.requests[2].ttft() == Approx(0.020));

  // One tier (the pool alone, as without tiers): A's second turn computes 17 tokens eagerly,
  // 34 ms + 5 ms.
  const simulation_result one = simulate(tiered(4, {{.name = "hbm", .capacity_tokens = 64}}), trace);
  REQUIRE(one.tiers.size() == 1);
  CHECK(one.tiers[0].hit_blocks == 1);
  CHECK(one.requests[2].ttft() == Approx(0.039));
  const simulation_result none = simulate(tiered(4, {}), trace);
  CHECK(none.tiers.empty());
  CHECK(none.requests[2].ttft() == Approx(0.039));
  CHECK(none.scheduler.prefix_hit_tokens == 16);
}

TEST_CASE("simulate --tiers: a block pushed out of dram is found in ssd") {
  // A, B, C, A with dram holding one block: B evicts a1 to dram; C evicts a0 (a1 spills to
  // ssd) and then B's b1 (a0 spills to ssd). A finds both its blocks in ssd: 32 tokens x 32
  // bytes at 10,240 bytes/s = 100 ms, then computes 1 token (10 ms).
  const std::vector<serving::trace_request> trace = {request(0, 1), request(1, 2), request(2, 3), request(3, 1)};
  const simulation_result r = simulate(tiered(4, {{.name = "hbm"},
                                                  {.name = "dram", .capacity_tokens = 16, .bandwidth = 51'200},
                                                  {.name = "ssd", .capacity_tokens = 160, .bandwidth = 10'240}}),
                                       trace);
  REQUIRE(r.tiers.size() == 3);
  CHECK(r.tier_looked_up_blocks == 8);
  CHECK(r.tiers[0].hit_blocks == 0);
  CHECK(r.tiers[1].hit_blocks == 0);
  CHECK(r.tiers[2].hit_blocks == 2);
  CHECK(r.tiers[2].hit_tokens == 32);
  CHECK(r.tiers[2].hit_rate == Approx(0.25));
  CHECK(r.tiers[2].load_seconds == Approx(0.100));
  CHECK(r.requests[3].ttft() == Approx(0.110));
}

TEST_CASE("simulate --tiers refuses what it cannot model, naming it") {
  const std::vector<serving::trace_request> trace = {request(0, 1)};
  simulation_config c = tiered(4, {{.name = "hbm", .capacity_tokens = 100}});
  CHECK_THROWS_WITH(simulate(c, trace), "cache tier hbm: capacity = 100 tokens; the first tier is the replica's KV pool, "
                                        "which holds 64 tokens: give it without a capacity, or exactly that");
  c = tiered(4, {{.name = "hbm"}, {.name = "dram", .capacity_tokens = 64}});
  CHECK_THROWS_WITH(simulate(c, trace), "cache tier dram: bandwidth = 0.000000 bytes/s must be positive (a hit below the "
                                        "top tier is loaded)");
  c = tiered(4, {{.name = "hbm"}});
  c.prefix_caching = false;
  CHECK_THROWS_WITH(simulate(c, trace), "simulate: a cache in tiers keeps the blocks the prefix cache evicts: turn "
                                        "prefix_caching on");
}

TEST_CASE("simulate --tiers at low load finds what the tiered study finds, tier by tier") {
  // One request at a time (100 s apart), one output token, no watermark: the replica's pool
  // is the study's top tier. Prompts of whole 512-token id blocks, each ending in an id of its
  // own (so the study's extra token and simulate's cap one token short of the prompt look up
  // the same shared blocks), leading ids from four families; every third request shares the
  // previous one's family and length (its prefix still in the pool).
  std::vector<serving::trace_request> trace;
  int family = 0, shared = 1;
  for (int i = 0; i < 60; ++i) {
    if (i % 3 != 2) {
      family = (i * 5 + i / 7) % 4;
      shared = 1 + (i * 7) % 3;
    }
    serving::trace_request q{.arrival = 100.0 * i, .prompt_tokens = 512 * (shared + 1), .output_tokens = 1};
    for (int j = 0; j < shared; ++j) q.hash_ids.push_back(static_cast<std::uint64_t>(10 * family + j));
    q.hash_ids.push_back(static_cast<std::uint64_t>(1000 + i));
    trace.push_back(std::move(q));
  }
  const std::vector<cache_tier> tiers = {{.name = "hbm", .capacity_tokens = 160 * 16},
                                         {.name = "dram", .capacity_tokens = 1536, .bandwidth = 1e9},
                                         {.name = "ssd", .capacity_tokens = 3072, .bandwidth = 1e8}};
  simulation_config c = tiered(160, {{.name = "hbm"}, tiers[1], tiers[2]});
  c.max_model_len = 4096;
  const simulation_result r = simulate(c, trace);
  const tiered_study s = tiered_prefix_study(trace, tiers, 16, 32, 1e-3);
  REQUIRE(r.tiers.size() == 3);
  REQUIRE(r.rejected == 0);
  CHECK(s.too_large == 0);
  // The study looks up each prompt's last block too (one per request); neither can hit it.
  CHECK(r.tier_looked_up_blocks + 60 == s.looked_up_blocks);
  std::int64_t below = 0;
  for (std::size_t k = 0; k < 3; ++k) {
    INFO("tier " << k);
    CHECK(r.tiers[k].hit_blocks == s.tiers[k].hit_blocks);
    CHECK(r.tiers[k].hit_tokens == s.tiers[k].hit_tokens);
    CHECK(r.tiers[k].load_seconds == Approx(s.tiers[k].load_seconds));
    below += k > 0 ? r.tiers[k].hit_blocks : 0;
  }
  CHECK(r.tiers[0].hit_blocks > 0);  // every tier serves some of them
  CHECK(r.tiers[1].hit_blocks > 0);
  CHECK(r.tiers[2].hit_blocks > 0);
  CHECK(below > 0);
}

TEST_CASE("simulate --tiers on a fleet and on data-parallel ranks: each replica's own tiers, summed") {
  // The first case's A, B, A on each of two replicas: round-robin sends requests 0, 2, 4 to
  // replica 0 and 1, 3, 5 to replica 1, so each replica serves A, B, A on its own pool and
  // its own dram, exactly as the single replica did.
  const std::vector<serving::trace_request> trace = {request(0, 1), request(0.5, 1), request(1, 2),
                                                     request(1.5, 2), request(2, 1), request(2.5, 1)};
  const simulation_config c = tiered(4, {{.name = "hbm"}, {.name = "dram", .capacity_tokens = 64, .bandwidth = 51'200}});
  const fleet_result f = simulate_fleet(c, trace, 2);
  REQUIRE(f.replicas.size() == 2);
  for (const simulation_result& s : f.replicas) {
    REQUIRE(s.tiers.size() == 2);
    CHECK(s.tier_looked_up_blocks == 6);
    CHECK(s.tiers[0].hit_blocks == 1);
    CHECK(s.tiers[1].hit_blocks == 1);
  }
  const simulation_result& t = f.total;
  REQUIRE(t.tiers.size() == 2);
  CHECK(t.tiers[0].tier.name == "hbm");
  CHECK(t.tiers[0].tier.capacity_tokens == 64);  // one replica's pool
  CHECK(t.tiers[1].tier.name == "dram");
  CHECK(t.tier_looked_up_blocks == 12);
  CHECK(t.tiers[0].hit_blocks == 2);
  CHECK(t.tiers[0].hit_tokens == 32);
  CHECK(t.tiers[0].load_seconds == 0);
  CHECK(t.tiers[1].hit_blocks == 2);
  CHECK(t.tiers[1].hit_tokens == 32);
  CHECK(t.tiers[1].hit_rate == Approx(2.0 / 12));
  CHECK(t.tiers[1].load_seconds == Approx(0.020));
  CHECK(t.requests[4].ttft() == Approx(0.020));  // A's second turn on each replica: 10 ms load + 10 ms
  CHECK(t.requests[5].ttft() == Approx(0.020));

  // Data-parallel ranks in lockstep: the same split and the same hits; a rank's load is its
  // step's, which the other rank's dummy step waits for.
  const data_parallel_result d = simulate_data_parallel(c, trace, 2);
  const simulation_result& l = d.lockstep.total;
  REQUIRE(l.tiers.size() == 2);
  CHECK(l.tier_looked_up_blocks == 12);
  CHECK(l.tiers[1].hit_blocks == 2);
  CHECK(l.tiers[1].load_seconds == Approx(0.020));
  CHECK(d.independent.total.tiers[1].hit_blocks == 2);
}
