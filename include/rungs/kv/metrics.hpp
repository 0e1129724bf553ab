// kv_metrics: what an operator needs to see about the KV cache, with live, cached-evictable
// and free blocks reported separately (cached blocks nobody uses are not a leak: reporting
// them as "used" is how users mistook a warm prefix cache for leaked memory).
#pragma once

#include <cstdint>
#include <ostream>

namespace rungs::kv {

struct kv_metrics {
  std::int32_t num_blocks = 0;
  std::int32_t live_blocks = 0;    // in some sequence's block table
  std::int32_t cached_blocks = 0;  // no user, hash kept: reusable by a prefix hit, evictable
  std::int32_t free_blocks = 0;    // no user, no hash
  std::int32_t sequences = 0;
  std::uint64_t prefix_query_tokens = 0;  // prompt tokens of admitted sequences
  std::uint64_t prefix_hit_tokens = 0;    // of which found in the prefix cache
  std::uint64_t evictions = 0;            // cached blocks reused for other contents
  std::uint64_t cow_copies = 0;           // copy-on-write block copies requested

  /// Fraction of blocks held by sequences (vLLM's "KV cache usage").
  double usage() const { return num_blocks ? double(live_blocks) / num_blocks : 0.0; }
  double prefix_hit_rate() const {
    return prefix_query_tokens ? double(prefix_hit_tokens) / double(prefix_query_tokens) : 0.0;
  }

  friend bool operator==(const kv_metrics&, const kv_metrics&) = default;
  friend std::ostream& operator<<(std::ostream& os, const kv_metrics& m) {
    return os << "kv_metrics{blocks " << m.num_blocks << ": live " << m.live_blocks << ", cached "
              << m.cached_blocks << ", free " << m.free_blocks << "; sequences " << m.sequences
              << "; prefix hits " << m.prefix_hit_tokens << "/" << m.prefix_query_tokens
              << " tokens; evictions " << m.evictions << "; cow copies " << m.cow_copies << "}";
  }
};

/// A pool's block counts, with an allocator's sequences and prefix counters, as kv_metrics.
template <class Pool>
kv_metrics pool_metrics(const Pool& pool, std::int32_t sequences, std::uint64_t prefix_query_tokens,
                        std::uint64_t prefix_hit_tokens) {
  kv_metrics m;
  m.num_blocks = pool.num_blocks();
  m.live_blocks = pool.num_live();
  m.cached_blocks = pool.num_evictable();
  m.free_blocks = pool.num_free();
  m.sequences = sequences;
  m.prefix_query_tokens = prefix_query_tokens;
  m.prefix_hit_tokens = prefix_hit_tokens;
  m.evictions = pool.evictions();
  return m;
}

}  // namespace rungs::kv
