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
//
// Under load, simulate runs the same hierarchy (simulation_config::tiers): tier_store below
// is the tiers under HBM as a kv::prefix_tier of the replica's allocator, which demotes what
// its pool evicts and promotes what an admission finds; the load of a promoted block is added
// to the step that admits its request (planning/simulate.hpp).
#pragma once

#include <rungs/kv/detail/block_hash_map.hpp>
#include <rungs/kv/prefix_tier.hpp>
#include <rungs/planning/prefix_study.hpp>

#include <algorithm>
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

namespace detail {
/// A tier's own rules, stated once for the study and the simulator: it holds at least one block
/// and, below the top (where a hit is loaded), has a positive bandwidth.
inline void check_tier(const cache_tier& t, std::int32_t block_size, bool below_top) {
  if (t.capacity_tokens < block_size)
    throw std::invalid_argument("cache tier " + t.name + ": capacity = " + std::to_string(t.capacity_tokens) +
                                " tokens holds no block of " + std::to_string(block_size));
  if (below_top && !(t.bandwidth > 0 && t.bandwidth <= 1e15))
    throw std::invalid_argument("cache tier " + t.name + ": bandwidth = " + std::to_string(t.bandwidth) +
                                " bytes/s must be positive (a hit below the top tier is loaded)");
}
}  // namespace detail

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
    detail::check_tier(t, block_size, k > 0);
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

/// One tier of a simulated cache in tiers, as simulate reports it (index 0: HBM, the pool).
struct simulated_tier {
  cache_tier tier;                             ///< HBM's capacity_tokens: the pool's
  std::int64_t hit_blocks = 0, hit_tokens = 0;  ///< found here at admissions
  double hit_rate = 0;                         ///< hit blocks / looked-up blocks of every admission
  double load_seconds = 0;                     ///< hit tokens x KV bytes per token / bandwidth (0 for HBM)
};

/// The tiers below HBM of a simulated replica (simulation_config::tiers[1...]), as the
/// lower tier of its allocator (kv::prefix_tier): each an LRU of block digests, exclusive, a
/// block evicted from HBM entering tier 1 and one pushed out of tier k entering tier k + 1
/// (out of the last it is gone). Each promotion adds its load, block_size x KV bytes per
/// token / the tier's bandwidth, to the seconds the next step takes (take_load_seconds).
///
/// The blocks live in one slot array, each tier an intrusive list through it, indexed by one
/// fixed-capacity digest map (the prefix cache's): a demotion or a promotion allocates
/// nothing once the slots are there. `max_blocks` bounds the slots: the most distinct blocks
/// the workload can write (a tier larger than that never fills).
class tier_store final : public kv::prefix_tier<kv::prefix_caching_allocator<>::cache_type::digest_type> {
 public:
  using digest = kv::prefix_caching_allocator<>::cache_type::digest_type;

  /// `tiers` top first; tiers[0] is HBM (the pool of `pool_tokens`, its capacity 0 or that).
  /// Throws std::invalid_argument naming a bad tier.
  tier_store(std::vector<cache_tier> tiers, std::int64_t pool_tokens, std::int32_t block_size,
             std::int64_t kv_bytes_per_token, std::int64_t max_blocks = std::numeric_limits<std::int64_t>::max())
      : block_size_(block_size), kv_bytes_per_token_(kv_bytes_per_token), levels_(tiers.size()),
        max_slots_(bounded_slots(tiers, block_size, max_blocks)),
        index_(static_cast<std::int32_t>(max_slots_)) {
    if (kv_bytes_per_token < 1)
      throw std::invalid_argument("cache tiers: KV bytes per token = " + std::to_string(kv_bytes_per_token) + " must be positive");
    cache_tier& top = tiers.front();
    if (top.capacity_tokens != 0 && top.capacity_tokens != pool_tokens)
      throw std::invalid_argument("cache tier " + top.name + ": capacity = " + std::to_string(top.capacity_tokens) +
                                  " tokens; the first tier is the replica's KV pool, which holds " +
                                  std::to_string(pool_tokens) + " tokens: give it without a capacity, or exactly that");
    top.capacity_tokens = pool_tokens;
    for (std::size_t k = 1; k < tiers.size(); ++k) levels_[k].capacity = tiers[k].capacity_tokens / block_size;
    for (std::size_t k = 0; k < tiers.size(); ++k) levels_[k].result.tier = std::move(tiers[k]);
  }

  void demote(const digest& d) override {
    if (levels_.size() < 2) return;  // one tier: an evicted block is gone
    if (const kv::block_id held = index_.find(d); held != kv::null_block) drop(held);  // a second copy left HBM
    std::int32_t s;
    if (!free_.empty()) {
      s = free_.back();
      free_.pop_back();
    } else {
      if (static_cast<std::int64_t>(slots_.size()) == max_slots_)
        throw std::logic_error("tier_store: more distinct blocks than max_blocks = " + std::to_string(max_slots_ - 1));
      s = static_cast<std::int32_t>(slots_.size());
      slots_.emplace_back();
    }
    slots_[static_cast<std::size_t>(s)].key = d;
    index_.insert(d, s);
    push_front(1, s);
    spill(1);
  }
  bool holds(const digest& d) const override { return index_.find(d) != kv::null_block; }
  void promote(const digest& d) override {
    const kv::block_id s = index_.find(d);
    if (s == kv::null_block) throw std::logic_error("tier_store: promote of a block no tier holds");
    level& from = levels_[static_cast<std::size_t>(slots_[static_cast<std::size_t>(s)].tier)];
    from.result.hit_blocks += 1;
    load_seconds_ += static_cast<double>(block_size_) * static_cast<double>(kv_bytes_per_token_) / from.result.tier.bandwidth;
    drop(s);
  }
  void looked_up(std::int32_t blocks, std::int32_t pool_hits) override {
    looked_up_ += blocks;
    levels_.front().result.hit_blocks += pool_hits;
  }

  /// The load seconds of the promotions since the last call (the step that admitted them).
  double take_load_seconds() { return std::exchange(load_seconds_, 0.0); }

  /// Every tier's hits so far, top first.
  std::vector<simulated_tier> results() const {
    std::vector<simulated_tier> v;
    for (std::size_t k = 0; k < levels_.size(); ++k) {
      simulated_tier t = levels_[k].result;
      t.hit_tokens = t.hit_blocks * block_size_;
      t.hit_rate = looked_up_ ? static_cast<double>(t.hit_blocks) / static_cast<double>(looked_up_) : 0.0;
      if (k > 0) t.load_seconds = static_cast<double>(t.hit_tokens) * static_cast<double>(kv_bytes_per_token_) / t.tier.bandwidth;
      v.push_back(std::move(t));
    }
    return v;
  }
  /// Full blocks the admissions looked up (the hit rates' denominator).
  std::int64_t looked_up_blocks() const { return looked_up_; }
  /// Blocks tier k holds now (k >= 1).
  std::int64_t size(std::size_t k) const { return levels_.at(k).size; }

 private:
  struct slot {
    digest key{};
    std::int32_t prev = -1, next = -1;  // toward the tier's most / least recently demoted
    std::int32_t tier = 0;
  };
  struct level {
    std::int32_t head = -1, tail = -1;  // most and least recently demoted
    std::int64_t size = 0, capacity = 0;  // blocks
    simulated_tier result{};
  };

  // The slots the index needs: the tiers below HBM together, at most `max_blocks`; checks
  // every tier below the top first (so a bad one is named before anything is sized).
  static std::int64_t bounded_slots(const std::vector<cache_tier>& tiers, std::int32_t block_size, std::int64_t max_blocks) {
    if (tiers.empty()) throw std::invalid_argument("cache tiers: no tier given");
    std::int64_t sum = 0;
    for (std::size_t k = 1; k < tiers.size(); ++k) {
      const cache_tier& t = tiers[k];
      detail::check_tier(t, block_size, true);
      sum = std::min(sum + t.capacity_tokens / block_size, max_blocks);  // no overflow: each term is below 2^59
    }
    if (sum + 1 > (std::int64_t{1} << 30))
      throw std::invalid_argument("cache tiers: the tiers below the first hold " + std::to_string(sum) +
                                  " blocks the workload can fill; at most 2^30 are simulated");
    return sum + 1;  // one spare: a demotion inserts before it spills
  }

  void push_front(std::size_t k, std::int32_t s) {
    level& l = levels_[k];
    slot& x = slots_[static_cast<std::size_t>(s)];
    x.tier = static_cast<std::int32_t>(k);
    x.prev = -1;
    x.next = l.head;
    if (l.head >= 0) slots_[static_cast<std::size_t>(l.head)].prev = s;
    l.head = s;
    if (l.tail < 0) l.tail = s;
    ++l.size;
  }
  void unlink(std::int32_t s) {
    slot& x = slots_[static_cast<std::size_t>(s)];
    level& l = levels_[static_cast<std::size_t>(x.tier)];
    (x.prev >= 0 ? slots_[static_cast<std::size_t>(x.prev)].next : l.head) = x.next;
    (x.next >= 0 ? slots_[static_cast<std::size_t>(x.next)].prev : l.tail) = x.prev;
    --l.size;
  }
  // Slot s leaves the store.
  void drop(std::int32_t s) {
    unlink(s);
    index_.erase(slots_[static_cast<std::size_t>(s)].key, s);
    free_.push_back(s);
  }
  // Tier k over its capacity by a block: its least recently demoted block moves down, out of
  // the last tier it is gone.
  void spill(std::size_t k) {
    for (; k < levels_.size() && levels_[k].size > levels_[k].capacity; ++k) {
      const std::int32_t s = levels_[k].tail;
      if (k + 1 == levels_.size()) return drop(s);
      unlink(s);
      push_front(k + 1, s);
    }
  }

  std::int32_t block_size_;
  std::int64_t kv_bytes_per_token_;
  std::vector<level> levels_;  // [0]: HBM (its hits only; its blocks are the pool's)
  std::int64_t max_slots_;
  kv::detail::block_hash_map<digest, kv::prefix_caching_allocator<>::cache_type::hasher_type> index_;  // digest -> slot
  std::vector<slot> slots_;
  std::vector<std::int32_t> free_;  // slots given back
  std::int64_t looked_up_ = 0;
  double load_seconds_ = 0;
};

}  // namespace rungs::planning
