// prefix_tier: a lower tier of the prefix cache (host DRAM, SSD, a remote store), below the
// pool's own cached blocks, as Mooncake, LMCache and SGLang's HiCache keep KV beyond HBM.
//
// paged_allocator::set_lower_tier(&t) attaches one; the tier is keyed by the blocks' chained
// digests (prefix_cache), so a block's content names it wherever it goes. The allocator then
//   demotes   every cached block it evicts (the lazy eviction of a reused block): t.demote(d)
//             after the digest left the pool's index;
//   promotes  at create(), after the pool's own hits end at block h: blocks h, h + 1, ... that
//             t.holds() (stopping at the first it does not, as the pool's lookup stops at its
//             first miss) become prefix hits too. Once the admission check passes, t.promote(d)
//             takes each one out of the tier, and the allocator gives it a pool block registered
//             under d with its KV counted as written (the load is the tier's to price);
//   reports   each admission's lookup: t.looked_up(blocks, pool_hits) with the full blocks
//             create() looked up (at most the prompt minus one token) and how many the pool hit.
// The hierarchy is exclusive: a block is in the pool or in the tier, never both. Without a
// tier (the default) none of this runs: a null check per eviction and per create().
#pragma once

#include <cstdint>

namespace rungs::kv {

template <class Digest>
class prefix_tier {
 public:
  virtual ~prefix_tier() = default;
  /// A cached block left the pool (evicted): the block named `d` moves here.
  virtual void demote(const Digest& d) = 0;
  /// Whether the block named `d` is here.
  virtual bool holds(const Digest& d) const = 0;
  /// The block named `d` (held here) moves up to the pool: an admission hit it.
  virtual void promote(const Digest& d) = 0;
  /// An admission looked up `blocks` full blocks, of which the pool held the first `pool_hits`.
  virtual void looked_up(std::int32_t blocks, std::int32_t pool_hits) = 0;
};

}  // namespace rungs::kv
