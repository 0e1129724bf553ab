// Tests of include/rungs/planning/cache_tiers.hpp: hits per tier of a cache in tiers, by hand.
#include <rungs/planning/cache_tiers.hpp>

#include <catch2/catch.hpp>

using namespace rungs;
using namespace rungs::planning;

TEST_CASE("cache tiers: a hit pushed out of the top tier is served by the next, and pays its load") {
  // Three prompts of two 512-token blocks: [1 2], [3 4], [1 2]. A 3-block tier admits one
  // request at a time (its blocks and one to spare); when [3 4] comes, [1 2] is evictable and
  // goes tail first: block 2 is pushed down to the second tier, block 1 stays. The third
  // request finds block 1 on top and block 2 one tier down.
  const std::vector<serving::trace_request> trace = {{.arrival = 0, .prompt_tokens = 1024, .output_tokens = 1, .hash_ids = {1, 2}},
                                                     {.arrival = 1, .prompt_tokens = 1024, .output_tokens = 1, .hash_ids = {3, 4}},
                                                     {.arrival = 2, .prompt_tokens = 1024, .output_tokens = 1, .hash_ids = {1, 2}}};
  const std::vector<cache_tier> tiers = {{.name = "hbm", .capacity_tokens = 1536},
                                         {.name = "dram", .capacity_tokens = 1536, .bandwidth = 1e6}};
  // 1000 KV bytes a token loaded at 1 MB/s: 1 ms a token; prefill 2 ms a token.
  const tiered_study s = tiered_prefix_study(trace, tiers, 512, 1000, 2e-3);
  CHECK(s.looked_up_blocks == 6);
  CHECK(s.requests == 3);
  CHECK(s.hit_rate == Approx(2.0 / 6));
  REQUIRE(s.tiers.size() == 2);
  CHECK(s.tiers[0].hit_blocks == 1);
  CHECK(s.tiers[0].load_seconds == 0);
  CHECK(s.tiers[0].net_seconds() == Approx(1.024));
  CHECK(s.tiers[1].hit_blocks == 1);
  CHECK(s.tiers[1].hit_tokens == 512);
  CHECK(s.tiers[1].hit_rate == Approx(1.0 / 6));
  CHECK(s.tiers[1].load_seconds == Approx(0.512));
  CHECK(s.tiers[1].prefill_seconds == Approx(1.024));
  CHECK(s.tiers[1].net_seconds() == Approx(0.512));

  // A top tier of 6 blocks keeps [1 2]: its hit needs no load.
  const tiered_study big = tiered_prefix_study(trace, {{.name = "hbm", .capacity_tokens = 3072},
                                                       {.name = "dram", .capacity_tokens = 1536, .bandwidth = 1e6}},
                                               512, 1000, 2e-3);
  CHECK(big.tiers[0].hit_blocks == 2);
  CHECK(big.tiers[0].net_seconds() == Approx(2.048));
  CHECK(big.tiers[1].hit_blocks == 0);

  CHECK_THROWS_WITH(tiered_prefix_study(trace, {{.name = "hbm", .capacity_tokens = 1536}, {.name = "ssd", .capacity_tokens = 1536}},
                                        512, 1000, 2e-3),
                    "cache tier ssd: bandwidth = 0.000000 bytes/s must be positive (a hit below the top tier is loaded)");
  CHECK_THROWS_WITH(tiered_prefix_study(trace, {{.name = "hbm", .capacity_tokens = 100}}, 512, 1000, 2e-3),
                    "cache tier hbm: capacity = 100 tokens holds no block of 512");
}
