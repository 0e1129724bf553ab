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

// ---- tier_store: the tiers below HBM as the allocator's lower tier (kv::prefix_tier) --------

TEST_CASE("tier_store: demotion fills each tier in LRU order and spills to the next; promotion takes a block out") {
  tier_store t({{.name = "hbm"}, {.name = "dram", .capacity_tokens = 32, .bandwidth = 1600},
                {.name = "ssd", .capacity_tokens = 16, .bandwidth = 800}},
               64, 16, 100);
  t.demote(1);
  t.demote(2);
  CHECK(t.size(1) == 2);
  t.demote(3);  // dram holds 2 blocks: 1, the least recently demoted, goes to ssd
  CHECK(t.size(1) == 2);
  CHECK(t.size(2) == 1);
  t.demote(4);  // 2 goes to ssd, which holds 1 block: 1 is gone
  CHECK(!t.holds(1));
  CHECK((t.holds(2) && t.holds(3) && t.holds(4)));
  t.looked_up(5, 1);
  t.promote(2);  // from ssd: 16 tokens x 100 bytes / 800 bytes/s = 2 s
  t.promote(4);  // from dram: 1 s
  CHECK(t.take_load_seconds() == Approx(3.0));
  CHECK(t.take_load_seconds() == 0);
  CHECK(!t.holds(2));
  const std::vector<simulated_tier> r = t.results();
  REQUIRE(r.size() == 3);
  CHECK(r[0].tier.capacity_tokens == 64);  // the pool's
  CHECK(r[0].hit_blocks == 1);
  CHECK(r[1].hit_tokens == 16);
  CHECK(r[1].load_seconds == Approx(1.0));
  CHECK(r[2].hit_rate == Approx(0.2));
  CHECK(r[2].load_seconds == Approx(2.0));
  CHECK_THROWS_WITH(t.promote(99), "tier_store: promote of a block no tier holds");

  CHECK_THROWS_WITH(tier_store({{.name = "hbm", .capacity_tokens = 100}}, 64, 16, 100),
                    "cache tier hbm: capacity = 100 tokens; the first tier is the replica's KV pool, which holds 64 "
                    "tokens: give it without a capacity, or exactly that");
  CHECK_NOTHROW(tier_store({{.name = "hbm", .capacity_tokens = 64}}, 64, 16, 100));
  CHECK_THROWS_WITH(tier_store({{.name = "hbm"}, {.name = "ssd", .capacity_tokens = 8, .bandwidth = 1}}, 64, 16, 100),
                    "cache tier ssd: capacity = 8 tokens holds no block of 16");
}

TEST_CASE("tier_store under a prefix-caching allocator: evicted blocks go down, a lookup continues there") {
  // A pool of 4 blocks of 16. Prompts of 33 tokens: blocks 0 and 1 are looked up (at most the
  // prompt minus one token), block 2 holds the last token.
  kv::prefix_caching_allocator<> a({.num_blocks = 4, .block_size = 16, .max_sequences = 2, .max_model_len = 64});
  tier_store t({{.name = "hbm"}, {.name = "dram", .capacity_tokens = 64, .bandwidth = 1600}}, 64, 16, 100);
  a.set_lower_tier(&t);
  auto prompt = [](kv::token_id base) {
    std::vector<kv::token_id> p(33);
    for (std::size_t i = 0; i < p.size(); ++i) p[i] = base + static_cast<kv::token_id>(i);
    return p;
  };
  auto run = [&a](const std::vector<kv::token_id>& p) {
    const auto s = a.create(p);
    REQUIRE(s.has_value());
    const std::int32_t hit = s->cached_tokens;
    REQUIRE(a.append(s->id, std::span<const kv::token_id>(p).subspan(static_cast<std::size_t>(hit))) == kv::errc::ok);
    REQUIRE(a.commit(s->id, 33) == kv::errc::ok);
    REQUIRE(a.free(s->id) == kv::errc::ok);
    REQUIRE(a.check_consistency().empty());
    return hit;
  };
  CHECK(run(prompt(1000)) == 0);  // A: blocks a0 a1 cached, a2 (partial) free
  // B takes the two free blocks and evicts A's tail a1 (released first): a1 goes to dram.
  CHECK(run(prompt(2000)) == 0);
  CHECK(t.size(1) == 1);
  // A again: a0 in the pool, a1 in dram: both hit; a1 is promoted (16 tokens x 100 bytes /
  // 1600 bytes/s = 1 s) and its block, and the last one, evict B's tail blocks to dram.
  CHECK(run(prompt(1000)) == 32);
  CHECK(t.take_load_seconds() == Approx(1.0));
  CHECK(t.size(1) == 1);
  const std::vector<simulated_tier> r = t.results();
  CHECK(t.looked_up_blocks() == 6);
  CHECK(r[0].hit_blocks == 1);
  CHECK(r[1].hit_blocks == 1);
  CHECK(a.metrics().prefix_hit_tokens == 32u);
  // A fourth time: all in the pool now (a1 came back up).
  CHECK(run(prompt(1000)) == 32);
  CHECK(t.take_load_seconds() == 0);
  a.set_lower_tier(nullptr);

  kv::prefix_caching_allocator<> window({.num_blocks = 4, .block_size = 16, .max_model_len = 64, .sliding_window = 8});
  CHECK_THROWS_WITH(window.set_lower_tier(&t), "paged_allocator: a lower prefix tier needs full attention; sliding_window = 8");
}
