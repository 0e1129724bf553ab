// cache_tiers: a prefix cache spread over tiers (GPU HBM, host DRAM, SSD, ...), as Mooncake
// serves from, studied on a trace: the hit rate each tier serves and the prefill time its hits
// save once their load is paid.
//
// The tiers form an exclusive hierarchy: a block found in any tier is a hit and moves to the
// top tier (promotion); a block pushed out of a tier moves to the next one down (demotion), and
// out of the last it is gone. With LRU in every tier the top k tiers then hold exactly the
// blocks an LRU cache of their combined capacity would hold (LRU's inclusion property: the
// most recently used blocks are on top), so the hits served by tiers 1..k are the hits of one
// prefix_cache_study at the combined capacity, and tier k serves the difference between the
// combined capacities up to k and up to k - 1. The study replays the trace once per cumulative
// capacity through rungs' prefix-caching allocator (planning/prefix_study.hpp, its semantics:
// prompts in file order, a lookup stops at the first miss).
//
// What a hit buys: its tokens are not prefilled (`prefill_seconds_per_token` each, a
// compute-bound prefill: the cost model's seconds_per_token) but loaded into HBM at the tier's
// bandwidth (`kv_bytes_per_token` each; the top tier's hits are in place and cost nothing to
// load). A tier whose load per token is slower than the prefill it replaces saves nothing;
// its net figure is negative. These are sums over the trace, not a simulated TTFT: load and
// prefill are not overlapped and queueing is not modelled.
#pragma once

#include <rungs/planning/prefix_study.hpp>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace rungs::planning {

struct cache_tier {
  std::string name;
  std::int64_t capacity_tokens = 0;
  double bandwidth = 0;  ///< bytes/s a hit loads into HBM at (ignored for the top tier)
};

struct tier_result {
  cache_tier tier;
  std::int64_t hit_blocks = 0, hit_tokens = 0;
  double hit_rate = 0;            ///< hit blocks / looked-up blocks of the whole trace
  double load_seconds = 0;        ///< hit tokens x bytes per token / bandwidth (0 for the top tier)
  double prefill_seconds = 0;     ///< the prefill its hits replace
  double net_seconds() const { return prefill_seconds - load_seconds; }
};

struct tiered_study {
  std::vector<tier_result> tiers;
  std::int64_t looked_up_blocks = 0, prompt_tokens = 0, requests = 0, too_large = 0;
  double hit_rate = 0;  ///< all tiers together
};

/// Studies `trace` on `tiers` (top first). Throws std::invalid_argument naming a bad tier.
inline tiered_study tiered_prefix_study(const std::vector<serving::trace_request>& trace, const std::vector<cache_tier>& tiers,
                                        std::int32_t block_size, std::int64_t kv_bytes_per_token,
                                        double prefill_seconds_per_token) {
  if (tiers.empty()) throw std::invalid_argument("cache tiers: no tier given");
  if (kv_bytes_per_token < 1)
    throw std::invalid_argument("cache tiers: KV bytes per token = " + std::to_string(kv_bytes_per_token) + " must be positive");
  if (!(prefill_seconds_per_token >= 0 && prefill_seconds_per_token <= 1))
    throw std::invalid_argument("cache tiers: prefill seconds per token must be in [0, 1]");
  std::vector<std::int64_t> cumulative;
  std::int64_t sum = 0;
  for (std::size_t k = 0; k < tiers.size(); ++k) {
    const cache_tier& t = tiers[k];
    if (t.capacity_tokens < block_size)
      throw std::invalid_argument("cache tier " + t.name + ": capacity = " + std::to_string(t.capacity_tokens) +
                                  " tokens holds no block of " + std::to_string(block_size));
    if (k > 0 && !(t.bandwidth > 0 && t.bandwidth <= 1e15))
      throw std::invalid_argument("cache tier " + t.name + ": bandwidth = " + std::to_string(t.bandwidth) +
                                  " bytes/s must be positive (a hit below the top tier is loaded)");
    if (t.capacity_tokens > std::numeric_limits<std::int64_t>::max() - sum)
      throw std::invalid_argument("cache tier " + t.name + ": the tiers together hold more than 2^63 - 1 tokens");
    sum += t.capacity_tokens;
    cumulative.push_back(sum);
  }
  const std::vector<prefix_cache_point> points = prefix_cache_study(trace, cumulative, block_size);
  tiered_study s;
  const prefix_cache_point& all = points.back();
  s.looked_up_blocks = all.looked_up_blocks;
  s.prompt_tokens = all.prompt_tokens;
  s.requests = all.requests;
  s.too_large = all.too_large;
  s.hit_rate = all.hit_rate();
  std::int64_t blocks_above = 0, tokens_above = 0;
  for (std::size_t k = 0; k < tiers.size(); ++k) {
    tier_result r{.tier = tiers[k]};
    r.hit_blocks = points[k].hit_blocks - blocks_above;
    r.hit_tokens = points[k].hit_tokens - tokens_above;
    blocks_above = points[k].hit_blocks;
    tokens_above = points[k].hit_tokens;
    r.hit_rate = s.looked_up_blocks ? static_cast<double>(r.hit_blocks) / static_cast<double>(s.looked_up_blocks) : 0.0;
    r.prefill_seconds = static_cast<double>(r.hit_tokens) * prefill_seconds_per_token;
    if (k > 0) r.load_seconds = static_cast<double>(r.hit_tokens) * static_cast<double>(kv_bytes_per_token) / tiers[k].bandwidth;
    s.tiers.push_back(std::move(r));
  }
  return s;
}

}  // namespace rungs::planning
